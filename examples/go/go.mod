module github.com/sluiceway/sluiceway/examples/go

go 1.26.0

require github.com/sluiceway/sluiceway/sdk/go v0.0.0

require (
	github.com/apapsch/go-jsonmerge/v2 v2.0.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/oapi-codegen/runtime v1.9.0 // indirect
)

// The SDK from this repository; outside it, drop this line and `go get` a version.
replace github.com/sluiceway/sluiceway/sdk/go => ../../sdk/go
