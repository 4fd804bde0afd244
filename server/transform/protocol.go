package transform

// The sandbox parent and its worker processes talk over the worker's
// stdin and stdout with gob-encoded frames: one job in, one outcome out,
// strictly in turn. Nothing else is written to the worker's stdout.

// job is one transformation to run.
type job struct {
	// Key identifies the compiled program in the worker's cache (a hash
	// of Name and Script).
	Key string
	// Name labels the program in positions and stack traces.
	Name string
	// Script is the transformation's source (a function body).
	Script string
	// Data is the upstream response body: JSON text when DataJSON, else
	// text handed to the script as a string.
	Data     []byte
	DataJSON bool
	// Status and Headers make up the script's `response` argument.
	Status  int
	Headers map[string]string
	// TimeoutNanos bounds the script's run (and the encoding of its result).
	TimeoutNanos int64
	// MaxOutput caps the JSON encoding of the result, in bytes.
	MaxOutput int64
}

// Outcome kinds reported by a worker.
const (
	outcomeOK      = ""
	outcomeCompile = "compile"
	outcomeThrow   = "throw"
	outcomeTimeout = "timeout"
	outcomeOutput  = "output"
	outcomeStack   = "stack"
	outcomeData    = "data"
	outcomeCrash   = "crash"
)

// outcome is a job's result: the JSON of what the script returned, or why
// it failed and where.
type outcome struct {
	Output  []byte
	Kind    string
	Message string
	// Line and Column locate the failure in the user's script (1-based);
	// 0 when unknown.
	Line   int
	Column int
}
