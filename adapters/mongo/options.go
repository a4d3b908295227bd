package mongo

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentsessions/sessions/session/driver"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// Defaults, shared with the Python SDK's MongoDBSession so that both can
// use one database.
const (
	DefaultDatabase           = "agents"
	DefaultSessionsCollection = "agent_sessions"
	DefaultMessagesCollection = "agent_messages"
	// DefaultCheckpointsCollection holds run-state checkpoints (see
	// "Checkpoints" in the package documentation); the Python SDK has no
	// such collection and never reads it.
	DefaultCheckpointsCollection = "agent_checkpoints"
	// DefaultOperationsCollection holds the operation ids of
	// Session.AddItemsOnce (see the package documentation); the Python SDK
	// has no such collection and never reads it.
	DefaultOperationsCollection = "agent_operations"
)

// MaxDocumentBytes is the largest BSON document a MongoDB server stores
// (16 MiB). A batch is one document, so it bounds a batch too.
const MaxDocumentBytes = 16 * 1024 * 1024

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// Database names the database. Empty means the database named in the
	// URI's path (Open), else DefaultDatabase.
	Database string
	// SessionsCollection names the collection of session documents;
	// empty means DefaultSessionsCollection.
	SessionsCollection string
	// MessagesCollection names the collection of message (batch)
	// documents; empty means DefaultMessagesCollection.
	MessagesCollection string
	// CheckpointsCollection names the collection of checkpoint documents;
	// empty means DefaultCheckpointsCollection.
	CheckpointsCollection string
	// OperationsCollection names the collection of the operation ids of
	// AddItemsOnce; empty means DefaultOperationsCollection.
	OperationsCollection string
	// TTL, when positive, expires a session's whole history TTL after its
	// last write (append, pop, clear, replace or Touch). Reads do not
	// refresh it. See the package documentation for how expiry works on
	// servers with and without TTL indexes.
	TTL time.Duration
	// WriteConcern applies to every write; nil means majority.
	WriteConcern *writeconcern.WriteConcern
	// OnCorrupt receives reports of stored records that are not JSON
	// objects; nil logs a warning with slog.
	OnCorrupt driver.CorruptHandler
	// MaxBatchBytes bounds the encoded size of one batch document; zero
	// means MaxDocumentBytes, which is also the most it may be. A larger
	// batch is refused with an error wrapping session.ErrBatchTooLarge
	// before anything is written.
	MaxBatchBytes int
	// Now is the clock used for expiry; nil means time.Now. Every client of
	// a database with a TTL should have a clock within a few seconds of the
	// others (NTP), since expiry instants are written by clients.
	Now func() time.Time
}

// withDefaults fills in the defaults and checks the values.
func (o Options) withDefaults() (Options, error) {
	if o.Database == "" {
		o.Database = DefaultDatabase
	}
	if o.SessionsCollection == "" {
		o.SessionsCollection = DefaultSessionsCollection
	}
	if o.MessagesCollection == "" {
		o.MessagesCollection = DefaultMessagesCollection
	}
	if o.CheckpointsCollection == "" {
		o.CheckpointsCollection = DefaultCheckpointsCollection
	}
	if o.OperationsCollection == "" {
		o.OperationsCollection = DefaultOperationsCollection
	}
	names := map[string]bool{o.SessionsCollection: true, o.MessagesCollection: true, o.CheckpointsCollection: true, o.OperationsCollection: true}
	if len(names) != 4 {
		return o, errors.New("mongo: the sessions, messages, checkpoints and operations collections must differ")
	}
	if o.TTL < 0 {
		return o, fmt.Errorf("mongo: negative TTL %v", o.TTL)
	}
	if o.TTL > 0 && o.TTL < time.Millisecond {
		return o, fmt.Errorf("mongo: TTL %v is below the millisecond resolution of BSON dates", o.TTL)
	}
	switch {
	case o.MaxBatchBytes < 0:
		return o, fmt.Errorf("mongo: negative MaxBatchBytes %d", o.MaxBatchBytes)
	case o.MaxBatchBytes == 0:
		o.MaxBatchBytes = MaxDocumentBytes
	case o.MaxBatchBytes > MaxDocumentBytes:
		return o, fmt.Errorf("mongo: MaxBatchBytes %d exceeds the %d-byte document limit", o.MaxBatchBytes, MaxDocumentBytes)
	}
	if o.WriteConcern == nil {
		o.WriteConcern = writeconcern.Majority()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// messageSlack is how long message documents outlive their session's
// expiry on the server, so that a TTL monitor never removes a message
// document before the session it belongs to has expired. It also sets how
// often their expiry is pushed forward (at most once per slack/2 of
// activity per session).
func (o Options) messageSlack() time.Duration {
	return min(o.TTL, time.Hour)
}
