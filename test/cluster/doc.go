// Package cluster tests Switchboard as several replicas: real
// `switchboard serve` processes on one PostgreSQL and one Redis, all on
// loopback, with writes, revocations, limits, webhook deliveries and OAuth
// refreshes spread over them and replicas killed mid-flight.
package cluster
