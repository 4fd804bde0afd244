# Switchboard developer tasks. `make test` is the test command CI runs.

TERRAFORM ?= $(shell command -v terraform 2>/dev/null || command -v tofu 2>/dev/null)

.PHONY: test unit generate check-generated lint fmt build bench fetch-specs

## test: generated code up to date, vet, then every test including Terraform acceptance tests
test: check-generated fetch-specs
	go vet ./...
	@if [ -z "$(TERRAFORM)" ]; then echo "terraform (or tofu) not found on PATH: install it or set TERRAFORM=/path" >&2; exit 1; fi
	if [ -n "$$TF_CLI_CONFIG_FILE" ] && [ ! -f "$$TF_CLI_CONFIG_FILE" ]; then unset TF_CLI_CONFIG_FILE; fi; \
	TF_ACC=1 TF_ACC_PROVIDER_NAMESPACE=hashicorp TF_ACC_TERRAFORM_PATH=$(TERRAFORM) \
		go test -timeout 30m ./...
	# the server's tests again as replicas run: the PostgreSQL store, limits and budgets in Redis
	SWITCHBOARD_TEST_STORE=postgres SWITCHBOARD_TEST_REDIS=1 go test -timeout 30m ./server/...

## unit: tests without the Terraform acceptance tests
unit: fetch-specs
	go test ./...

## fetch-specs: the large API descriptions the OpenAPI import tests need, from npm into .cache/specs
fetch-specs:
	./scripts/fetch-specs.sh

## generate: regenerate the API server/client from server/openapi.yaml and the provider docs
generate:
	go generate ./...

check-generated:
	./scripts/check-generated.sh

## lint: gofmt and go vet
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt needed" >&2; exit 1)
	go vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

build:
	go build -o switchboard .

bench:
	go test -run '^$$' -bench . -benchmem ./...
