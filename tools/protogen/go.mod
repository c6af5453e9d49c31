// The code generators of gen/, pinned apart from tools/go.mod: the code they
// write runs on the product's own google.golang.org/protobuf and
// connectrpc.com/connect, so their versions must equal the ones the root
// go.mod requires (client/version_test.go checks it). In tools/go.mod, buf's
// own requirements would pull the generator along with any pre-release
// protobuf that buf needs.
module github.com/compactorhq/compactor/tools/protogen

go 1.26.0

tool (
	connectrpc.com/connect/cmd/protoc-gen-connect-go
	google.golang.org/protobuf/cmd/protoc-gen-go
)

require (
	connectrpc.com/connect v1.21.1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
