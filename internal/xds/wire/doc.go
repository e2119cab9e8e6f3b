// Package wire is how the xDS server's messages meet the wire: a gRPC codec
// that sends a response encoded once for many streams without copying it
// per stream (ServerOptions, Encoder), and decoders of the two request
// kinds that keep what the server reads of them and no more (unmarshalSotW,
// unmarshalDelta).
package wire
