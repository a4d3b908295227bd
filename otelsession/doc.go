// Package otelsession wraps any Session with OpenTelemetry tracing and
// metrics. It is a module of its own, so that the library's users who do not
// want OpenTelemetry never download it (as go-redis keeps redisotel apart).
//
// Every operation is a span (session.items, session.latest,
// session.add_items, session.pop_item, session.clear, session.replace)
// carrying the backend, the session id (a SHA-256 prefix by default; the
// raw id only with Options.RawSessionID), item counts and byte sizes, with
// errors recorded on the span. The metrics are:
//
//	session.operation.duration   histogram, seconds, by operation, backend and error
//	session.items.written        counter, items
//	session.items.read           counter, items
//	session.bytes.written        counter, bytes
//	session.bytes.read           counter, bytes
//	session.corrupt_records      counter, records (through CorruptHandler)
//
// RunStateEvents, installed with runstate.WithObserver, adds a pending
// write's settles, recoveries and held batches to the current span as events.
//
// The wrapper keeps the wrapped session's capabilities exactly: a wrapper
// that hid LatestReader would turn O(limit) reads into full reads, and one
// that added it would claim what the backend cannot do.
//
// With no provider set (OpenTelemetry's global defaults, before a program
// sets its own) or with OpenTelemetry's no-op providers, a call goes
// straight to the wrapped session after two atomic loads; once a program
// sets a global provider, wrapped sessions start recording. When recording,
// span attributes are built only for a sampled span, and metric attribute
// sets once per session.
package otelsession
