// Package driver is what an adapter author needs beside package session, in
// the manner of database/sql/driver: decoding the bytes a backend stored
// into Items without copying them (one record at a time, or the records of
// one read through a Decoder, which allocates their bookkeeping in blocks),
// checking a batch and a session id before anything is written, reporting
// a corrupt stored record, and the raw-write hook through which a test
// stores a record the adapter itself would refuse.
//
// Callers of a Session never need this package.
package driver
