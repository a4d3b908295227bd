// Package events keeps CloudWeGo eino's session event logs in a session
// store: Store[M] is eino's adk.SessionEventStore[M] (AppendEvents,
// LoadEvents) for M = *schema.Message and *schema.AgenticMessage, over the
// sessions of any backend (SQLite, PostgreSQL, Redis, MongoDB, memory, and
// the encrypted and otelsession wrappers). Give it to a Runner in session
// mode, with a CheckPointStore that outlives the process, and a
// conversation interrupted for a human's approval resumes in any process:
//
//	st, err := adapters.Open(ctx, "sqlite:///var/lib/agent/sessions.db")
//	evs, err := events.New[*schema.Message](st, events.Options{Prefix: "eino:"})
//	var cps adk.CheckPointStore = … // durable: the interrupt's checkpoint
//	runner := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent, SessionID: "conv-42", SessionStore: evs, CheckPointStore: cps})
//	iter := runner.Query(ctx, "send 100 EUR to bob")
//	// ... the tool interrupts for approval; the process may exit. Later, in any process:
//	iter, err = runner.ResumeWithParams(ctx, "", &adk.ResumeParams{Targets: map[string]any{interruptID: "approved"}})
//
// # A module of its own, pinned to eino's v0.10 line
//
// SessionEventStore exists only in eino's v0.10 alpha line; this module
// requires github.com/cloudwego/eino v0.10.0-alpha.12 and is tested with
// that version only (an alpha may change the interface; this module moves
// with it). integrations/eino (the checkpoint store) stays on eino
// v0.7.36, the release that resolves by default, so that its users are
// not moved to an alpha; a Go module requires one version of eino, hence
// two modules. This one does not require integrations/eino, nor any
// module of this repository but the library: eino's Runner resumes an
// interrupt from any adk.CheckPointStore, which the program chooses.
// integrations/eino's Store is one (a program that imports both modules
// builds them with eino v0.10; that module's own tests run on v0.7.36),
// and this module's tests use a map of their own.
//
// # How an event is stored
//
// Each eino session is one session of the store (Options.Prefix plus
// eino's session id), and each event is one item, in append order:
//
//	{"type":"eino.session_event","v":1,"event_id":"…","kind":"message","event":{…}}
//
// "event" is the event as the serializer wrote it (Options.Serializer,
// default schema.HumanReadableSerializer, which eino's own stores use),
// embedded as it is when an item can hold it (JSON in valid UTF-8, no
// deeper than session.MaxItemDepth) and as "event_base64" (standard base64
// of the bytes: a gob serializer's output, a message holding invalid
// UTF-8) otherwise; "event_id" and "kind" repeat the event's, so
// that reads filter and page by them without decoding. EncodeEvent and
// DecodeEvent are the two directions; LoadEvents returns what the
// serializer decodes, as eino's InMemoryStore does.
//
// The events are not mapped to Responses-API items: most of eino's events
// (lifecycle, spans, interrupts, rollbacks, model contexts) have no such
// item, and its messages carry what the API's items do not (eino's message
// ids in Extra, agentic content blocks), while eino's contract is that an
// event reads back exactly. The envelope is an item of a type no
// Responses-API rule pairs or rejects (history.Diagnose finds nothing in
// it), but it is not model input: a session that holds an eino event log
// is eino's, not a conversation to give history.ModelInput or the Python
// SDK. An item in it that this package did not write (or cannot decode)
// fails the read with an error wrapping ErrCorruptEvent that says where,
// never what; nothing is skipped, since eino rebuilds the model's input
// from every event.
//
// # Reads: only what is new
//
// A Store keeps, for each session it has read (up to Options.MaxSessions,
// the least recently used dropped), the items read and the cursor after
// them. Every AppendEvents and LoadEvents first reads what was appended
// since (session.ReadSince), then answers from memory, decoding only the
// events it returns: after the first read of a session, a call reads
// O(new) items, not the history. That holds where the session follows a
// cursor (session.Follower: SQLite, PostgreSQL, memory, Redis's native
// layout, MongoDB); elsewhere (Redis's Python layout, a wrapper that hides
// the capability) ReadSince reads the whole history and keeps what follows
// the cursor. A pop, clear or replace below the cursor (session.ErrCursorLost)
// makes the Store read the session again from the start. Several Stores,
// in several processes, over one session store see each other's events.
//
// # Appends: once per event id
//
// AppendEvents refuses, before writing anything, a nil event or one without
// an EventID, or with one that is not valid UTF-8, which JSON cannot carry
// (adk.ErrInvalidEventID; eino's in-memory store keeps such an id), an id twice in the batch, or an id
// the session already holds with another event (adk.ErrDuplicateEventID),
// and an event whose Kind does not match its payload. A batch whose every
// event is already stored as given is a replay (eino's persister re-sends
// the same events): it succeeds and writes nothing.
//
// The batch is appended as one atomic batch with session.AppendOnce under
// the operation id OpIDPrefix + its first event id, so that an append
// whose reply was lost (session.ErrOutcomeUnknown) is retried
// (Options.Retries) and lands once. Operation ids outlive the items: an
// event id that led a batch is refused with another event even after the
// session was cleared. On a session that cannot append at most once
// (session.ErrUnsupported), the batch is appended with session.Append and
// the check against what was read is the only one; an unknown outcome is
// then returned to the caller, whose replay is recognised.
//
// eino's Runner admits one writer per session at a time in a process.
// Across processes, the first event id of each batch is checked by the
// store itself (AppendOnce); the others against what was read just before
// the append, so two processes appending to one session at the same
// moment could store such an id twice; LoadEvents then returns both, and
// After names the first.
//
// # Tested with
//
// eino v0.10.0-alpha.12 (with github.com/bytedance/sonic v1.15.5, the
// version integrations/eino pins; eino asks for v1.15.0, which builds on
// Go 1.26 too), on Go 1.26: eino's own
// conformance suites (adk/session.RunConformanceTests, 14 cases, and
// RunSerializerConformanceTests) pass for both message types on memory,
// SQLite, Redis (both layouts), Redis Cluster, MongoDB (FerretDB) and
// PostgreSQL, and on memory and SQLite also with every capability hidden
// and through encrypted sessions; and an ADK ChatModelAgent in session mode whose tool
// interrupts for approval, resumed with "later" and then approved, and
// asked a follow-up, each step in a new Runner over reopened stores, gives
// its model the input eino's in-memory store gives, on every backend, with
// Generate and with streaming (the Runner's checkpoints kept, across those
// steps, in an in-memory CheckPointStore of the tests).
package events
