package rpc

// MutatingProcedures exposes mutatingProcedures to the external tests,
// which check that their table covers every mutating procedure.
var MutatingProcedures = mutatingProcedures
