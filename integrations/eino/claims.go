package eino

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cloudwego/eino/compose"

	"github.com/agentsessions/sessions/session"
)

// Errors of claims.
var (
	// ErrInDoubt: the call is claimed and no result is recorded: the
	// process that claimed it may be running the tool, may have run it, or
	// died inside it. See InDoubtError.
	ErrInDoubt = errors.New("eino: the tool call is claimed and in doubt")
	// ErrNotInDoubt: Resolve, Reclaim or Abandon was given a call that is
	// not claimed, or whose result is recorded.
	ErrNotInDoubt = errors.New("eino: the tool call is not in doubt")
	// ErrNoCallID: the context carries no checkpoint id (WithCheckPointID)
	// or no tool call id (eino's compose.GetToolCallID).
	ErrNoCallID = errors.New("eino: no checkpoint id or tool call id in the context")
)

// InDoubtError is ErrInDoubt (and session.ErrCheckpointConflict: another
// claim is stored) with the claim it found.
type InDoubtError struct {
	CheckPointID string
	Claim        Claim
}

func (e *InDoubtError) Error() string {
	return fmt.Sprintf("%v: checkpoint %q, call %q, claimed by %s at %s (no result recorded: the tool may have run)",
		ErrInDoubt, e.CheckPointID, e.Claim.CallID, e.Claim.By, e.Claim.At.Format(time.RFC3339))
}

// Unwrap returns ErrInDoubt and session.ErrCheckpointConflict.
func (e *InDoubtError) Unwrap() []error { return []error{ErrInDoubt, session.ErrCheckpointConflict} }

// Claim is a tool call's claim as the store keeps it.
type Claim struct {
	CallID string
	By     string    // who claimed it (host:pid by default)
	At     time.Time // when, to the second
	// Done: a result is recorded (the tool returned, or the call was
	// resolved or abandoned); Result is it.
	Done   bool
	Result string
}

// claimDoc is a claim's stored document.
type claimDoc struct {
	CallID string `json:"call_id"`
	By     string `json:"by"`
	At     string `json:"at"`
	Token  string `json:"token"`
	State  string `json:"state"` // "claimed" or "done"
	Result string `json:"result,omitempty"`
}

func (d claimDoc) claim() Claim {
	at, _ := time.Parse(time.RFC3339, d.At)
	return Claim{CallID: d.CallID, By: d.By, At: at, Done: d.State == "done", Result: d.Result}
}

// ClaimPrefix is what a claim's checkpoint name starts with, after the
// Store's name: a claim of call c is stored as Name()+ClaimPrefix+c in the
// session of its checkpoint id.
const ClaimPrefix = "/claim/"

type checkPointIDKey struct{}

// WithCheckPointID returns ctx carrying eino's checkpoint id, for the
// tools of a Runner run with it (Runner.Query with adk.WithCheckPointID,
// Runner.ResumeWithParams): eino hands a tool the context of the run and
// its call id (compose.GetToolCallID), not the checkpoint id, so the
// caller puts it in the context it runs with.
func WithCheckPointID(ctx context.Context, checkPointID string) context.Context {
	return context.WithValue(ctx, checkPointIDKey{}, checkPointID)
}

// CheckPointIDFrom returns the checkpoint id WithCheckPointID put in ctx.
func CheckPointIDFrom(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(checkPointIDKey{}).(string)
	return id, ok && id != ""
}

// Claims makes an approved tool's side effect happen at most once across
// resumes and processes: the tool claims its call (one versioned write,
// beside the checkpoint in the same session) before the side effect and
// records its result after it. Of two resumers that run the tool at once,
// one claims and the other gets an *InDoubtError before its side effect; a
// resume after a crash inside the tool finds the call in doubt (InDoubt)
// until the caller resolves it (Resolve, Reclaim, Abandon); a resume after
// the result was recorded gets the recorded result without running the
// tool again. A Claims is safe for concurrent use.
type Claims struct {
	store *Store
	owner string
}

// Claims returns the claims of the Store's checkpoints, kept in the same
// sessions.
func (s *Store) Claims() *Claims { return &Claims{store: s, owner: defaultOwner()} }

func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

func (c *Claims) name(callID string) string { return c.store.name + ClaimPrefix + callID }

// ids returns the checkpoint id and tool call id of ctx.
func ids(ctx context.Context) (checkPointID, callID string, err error) {
	checkPointID, ok := CheckPointIDFrom(ctx)
	callID = compose.GetToolCallID(ctx)
	if !ok || callID == "" {
		return "", "", fmt.Errorf("%w (checkpoint id %q, call id %q)", ErrNoCallID, checkPointID, callID)
	}
	return checkPointID, callID, nil
}

// Run is what an approved tool calls around its side effect: it claims
// the call of ctx (the checkpoint id of WithCheckPointID, the call id eino
// gives the tool), runs fn if the claim succeeded, and records fn's result.
// If the call's result is recorded already (an earlier resume ran it, or
// the caller resolved it), Run returns that result and fn does not run. If
// another claim stands, Run returns an *InDoubtError and fn does not run.
// If fn fails, the claim stays: the call is in doubt for every later
// resume, because fn may have acted before failing.
func (c *Claims) Run(ctx context.Context, fn func(ctx context.Context) (string, error)) (string, error) {
	cp, call, err := ids(ctx)
	if err != nil {
		return "", err
	}
	prior, version, err := c.claim(ctx, cp, call)
	if err != nil {
		return "", err
	}
	if prior != nil {
		return prior.Result, nil
	}
	result, err := fn(ctx)
	if err != nil {
		return "", err
	}
	if err := c.record(ctx, cp, call, version, result); err != nil {
		return "", fmt.Errorf("eino: the tool of call %q ran; recording its result failed (the call is in doubt): %w", call, err)
	}
	return result, nil
}

// claim saves a new claim under version 0 (a stored one conflicts). It
// returns the stored claim when its result is recorded.
func (c *Claims) claim(ctx context.Context, cp, call string) (*Claim, int64, error) {
	cs, err := c.store.Session(cp)
	if err != nil {
		return nil, 0, err
	}
	d := claimDoc{CallID: call, By: c.owner, At: time.Now().UTC().Format(time.RFC3339), Token: rand.Text(), State: "claimed"}
	doc, err := json.Marshal(d)
	if err != nil {
		return nil, 0, err
	}
	v, err := cs.SaveCheckpoint(ctx, c.name(call), doc, 0)
	if err == nil {
		return nil, v, nil
	}
	if !errors.Is(err, session.ErrCheckpointConflict) {
		// A save whose reply was lost: read back whether it landed.
		if got, gv, lerr := cs.LoadCheckpoint(ctx, c.name(call)); lerr == nil && string(got) == string(doc) {
			return nil, gv, nil
		}
		return nil, 0, fmt.Errorf("eino: claim call %q of checkpoint %q: %w", call, cp, err)
	}
	_, stored, _, err := c.load(ctx, cp, call)
	if err != nil {
		return nil, 0, err
	}
	if stored.State == "done" {
		cl := stored.claim()
		return &cl, 0, nil
	}
	return nil, 0, &InDoubtError{CheckPointID: cp, Claim: stored.claim()}
}

func done(d claimDoc, result string) claimDoc {
	d.State, d.Result = "done", result
	return d
}

// record saves the result over the claim this process saved (version).
func (c *Claims) record(ctx context.Context, cp, call string, version int64, result string) error {
	cs, d, v, err := c.load(ctx, cp, call)
	if err != nil {
		return err
	}
	if v != version {
		return fmt.Errorf("eino: claim of call %q changed since it was made: %w", call, session.ErrCheckpointConflict)
	}
	return c.save(ctx, cs, cp, done(d, result), v)
}

func (c *Claims) save(ctx context.Context, cs session.CheckpointStore, cp string, d claimDoc, version int64) error {
	doc, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if _, err := cs.SaveCheckpoint(ctx, c.name(d.CallID), doc, version); err != nil {
		return fmt.Errorf("eino: save claim of call %q of checkpoint %q: %w", d.CallID, cp, err)
	}
	return nil
}

// load reads the claim of call; session.ErrNoCheckpoint when there is none.
func (c *Claims) load(ctx context.Context, cp, call string) (session.CheckpointStore, claimDoc, int64, error) {
	cs, err := c.store.Session(cp)
	if err != nil {
		return nil, claimDoc{}, 0, err
	}
	raw, v, err := cs.LoadCheckpoint(ctx, c.name(call))
	if err != nil {
		return nil, claimDoc{}, 0, fmt.Errorf("eino: load claim of call %q of checkpoint %q: %w", call, cp, err)
	}
	var d claimDoc
	if err := json.Unmarshal(raw, &d); err != nil || d.CallID != call || (d.State != "claimed" && d.State != "done") {
		return nil, claimDoc{}, 0, fmt.Errorf("eino: claim of call %q of checkpoint %q is not a claim document: %.80q", call, cp, raw)
	}
	return cs, d, v, nil
}

// List returns every claim of checkPointID, oldest name first: those in
// doubt and those with a result.
func (c *Claims) List(ctx context.Context, checkPointID string) ([]Claim, error) {
	cs, err := c.store.Session(checkPointID)
	if err != nil {
		return nil, err
	}
	names, err := cs.ListCheckpoints(ctx)
	if err != nil {
		return nil, fmt.Errorf("eino: list claims of checkpoint %q: %w", checkPointID, err)
	}
	var out []Claim
	for _, n := range names {
		call, ok := strings.CutPrefix(n, c.store.name+ClaimPrefix)
		if !ok {
			continue
		}
		_, d, _, err := c.load(ctx, checkPointID, call)
		if errors.Is(err, session.ErrNoCheckpoint) {
			continue // deleted since the list
		}
		if err != nil {
			return nil, err
		}
		out = append(out, d.claim())
	}
	return out, nil
}

// InDoubt returns the claims of checkPointID with no result recorded:
// after a restart, the calls whose tools may have run. Each is resolved
// with Resolve (the result found, e.g. by asking the tool's system under
// the call id), Reclaim (run the tool again on the next resume, on
// purpose) or Abandon (the next resume returns message to the model). A
// claim of a process still running its tool is in doubt too: resolve only
// what a dead process left.
func (c *Claims) InDoubt(ctx context.Context, checkPointID string) ([]Claim, error) {
	all, err := c.List(ctx, checkPointID)
	var out []Claim
	for _, cl := range all {
		if !cl.Done {
			out = append(out, cl)
		}
	}
	return out, err
}

// Resolve records result for a call in doubt: the next resume's tool gets
// it from Run without running.
func (c *Claims) Resolve(ctx context.Context, checkPointID, callID, result string) error {
	cs, d, v, err := c.inDoubt(ctx, checkPointID, callID)
	if err != nil {
		return err
	}
	return c.save(ctx, cs, checkPointID, done(d, result), v)
}

// Abandon resolves a call in doubt with message as its result (that its
// outcome is unknown, say): the next resume's tool returns it to the model
// without running.
func (c *Claims) Abandon(ctx context.Context, checkPointID, callID, message string) error {
	return c.Resolve(ctx, checkPointID, callID, message)
}

// Reclaim removes the claim of a call in doubt (the version read: of two
// resolvers one wins, the other gets session.ErrCheckpointConflict), so
// that the next resume claims it anew and runs the tool again, on purpose.
func (c *Claims) Reclaim(ctx context.Context, checkPointID, callID string) error {
	cs, _, v, err := c.inDoubt(ctx, checkPointID, callID)
	if err != nil {
		return err
	}
	if err := cs.DeleteCheckpoint(ctx, c.name(callID), v); err != nil {
		return fmt.Errorf("eino: reclaim call %q of checkpoint %q: %w", callID, checkPointID, err)
	}
	return nil
}

func (c *Claims) inDoubt(ctx context.Context, cp, call string) (session.CheckpointStore, claimDoc, int64, error) {
	cs, d, v, err := c.load(ctx, cp, call)
	if errors.Is(err, session.ErrNoCheckpoint) {
		return nil, claimDoc{}, 0, fmt.Errorf("%w: call %q of checkpoint %q is not claimed", ErrNotInDoubt, call, cp)
	}
	if err != nil {
		return nil, claimDoc{}, 0, err
	}
	if d.State != "claimed" {
		return nil, claimDoc{}, 0, fmt.Errorf("%w: call %q of checkpoint %q has its result", ErrNotInDoubt, call, cp)
	}
	return cs, d, v, nil
}

// Clear deletes every claim of checkPointID, once its run is over (with
// the checkpoint: Store.Delete leaves claims alone). A later resume of
// the same checkpoint would run its tools again.
func (c *Claims) Clear(ctx context.Context, checkPointID string) error {
	cs, err := c.store.Session(checkPointID)
	if err != nil {
		return err
	}
	names, err := cs.ListCheckpoints(ctx)
	if err != nil {
		return fmt.Errorf("eino: list claims of checkpoint %q: %w", checkPointID, err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, c.store.name+ClaimPrefix) {
			if err := cs.DeleteCheckpoint(ctx, n, session.AnyVersion); err != nil {
				return fmt.Errorf("eino: clear claims of checkpoint %q: %w", checkPointID, err)
			}
		}
	}
	return nil
}
