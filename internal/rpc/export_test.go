package rpc

import "connectrpc.com/connect"

// MutatingProcedures exposes mutatingProcedures to the external tests,
// which check that their table covers every mutating procedure.
var MutatingProcedures = mutatingProcedures

// ResponseCompression is the handlers' compression (gzip at the level
// adaptiveGzip picks, none under compressMinBytes), for
// BenchmarkRPCOverhead's bare handler: both sides then send the same bytes.
func ResponseCompression() connect.HandlerOption { return compression(64 << 20) }
