package runstate

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Errors of claims and of the calls a Run is given.
var (
	// ErrInDoubt: a claimed call has no recorded output and its claim was
	// not made by this Run: the process that claimed it may have run the
	// tool, or died inside it. See InDoubtError.
	ErrInDoubt = errors.New("runstate: a claimed call is in doubt")
	// ErrNotInDoubt: Reclaim was given a call that is not in doubt.
	ErrNotInDoubt = errors.New("runstate: the call is not in doubt")
	// ErrUnknownCall: Interrupt was told to await an id that names no
	// call among its items nor an unanswered call in the session. See
	// UnknownCallError.
	ErrUnknownCall = errors.New("runstate: an awaited id names no call")
	// ErrNothingToSettle: Settle was given items but no interrupted turn
	// is open (another process settled it, or none was interrupted).
	ErrNothingToSettle = errors.New("runstate: no interrupted turn to settle")
	// ErrUnsettled: Turn or Interrupt while an interrupted turn's withheld
	// batch still waits for Settle.
	ErrUnsettled = errors.New("runstate: the interrupted turn is not settled; call Settle first")
)

// InDoubtError is ErrInDoubt with the calls it names. A call id is the
// natural idempotency key of its tool: ask the tool's system whether it
// acted on it, then resolve the call with Output (what it did), Reclaim
// (run it again, on purpose) or Abandon (tell the model it is unknown).
type InDoubtError struct {
	CallIDs []string
	Claims  []Claim // the claims as the checkpoint records them
}

func (e *InDoubtError) Error() string {
	return fmt.Sprintf("%v: %s (claimed, no output recorded: the tool may have run)", ErrInDoubt, strings.Join(e.CallIDs, ", "))
}

// Unwrap returns ErrInDoubt.
func (e *InDoubtError) Unwrap() error { return ErrInDoubt }

// UnknownCallError is ErrUnknownCall with the ids it names.
type UnknownCallError struct {
	CallIDs []string
}

func (e *UnknownCallError) Error() string {
	return fmt.Sprintf("%v: %s is not a call of the turn nor an unanswered call of the session", ErrUnknownCall, strings.Join(e.CallIDs, ", "))
}

// Unwrap returns ErrUnknownCall.
func (e *UnknownCallError) Unwrap() error { return ErrUnknownCall }

// Claim is a call whose tool a process started, as the checkpoint records
// it: written (one versioned save) before the tool runs, removed when the
// call's output is recorded.
type Claim struct {
	CallID string
	At     time.Time // when it was claimed, to the second
	By     string    // who claimed it (Options.Owner: host:pid by default)
}

// keyRun is the checkpoint member where a Run keeps what the Python
// RunState has no member for: claims, whether an interrupted turn awaits
// its settle, the last response id. The Python SDK does not read it.
const keyRun = "agentsessions_run"

// runMeta is the keyRun member.
type runMeta struct {
	Claims     map[string]claimRec `json:"claims,omitempty"`
	TurnOpen   bool                `json:"turn_open,omitempty"`
	ResponseID string              `json:"response_id,omitempty"`
}

type claimRec struct {
	At    string // RFC 3339, to the second
	By    string
	Token string // random, per Run: no two claims are the same bytes
}

func (m runMeta) clone() runMeta {
	c := m
	if m.Claims != nil {
		c.Claims = make(map[string]claimRec, len(m.Claims))
		for k, v := range m.Claims {
			c.Claims[k] = v
		}
	}
	return c
}

// decodeRunMeta reads the keyRun member strictly: what encode writes and
// nothing else.
func decodeRunMeta(raw json.RawMessage) (runMeta, error) {
	var m runMeta
	bad := func(format string, args ...any) (runMeta, error) {
		return runMeta{}, loadErr(ErrInvalidDocument, ruleRun, format, args...)
	}
	ms, err := members(raw)
	if err != nil {
		return bad("must be an object, got %s", clip(raw))
	}
	for _, mem := range ms {
		switch mem.Key {
		case "claims":
			cs, err := members(mem.Value)
			if err != nil {
				return bad("claims must be an object, got %s", clip(mem.Value))
			}
			m.Claims = make(map[string]claimRec, len(cs))
			for _, c := range cs {
				if c.Key == "" {
					return bad("a claim has an empty call id")
				}
				fs, err := members(c.Value)
				if err != nil || len(fs) != 3 {
					return bad("claim %q must be {\"at\", \"by\", \"token\"}, got %s", c.Key, clip(c.Value))
				}
				var rec claimRec
				for i, f := range []*string{&rec.At, &rec.By, &rec.Token} {
					v, _ := lookup(fs, [...]string{"at", "by", "token"}[i])
					var ok bool
					if *f, ok = jsonString(v); !ok {
						return bad("claim %q must be {\"at\", \"by\", \"token\"} of strings, got %s", c.Key, clip(c.Value))
					}
				}
				if _, err := time.Parse(time.RFC3339, rec.At); err != nil {
					return bad("claim %q: at is not an RFC 3339 time: %s", c.Key, strconv.Quote(rec.At))
				}
				m.Claims[c.Key] = rec
			}
		case "turn_open":
			if string(mem.Value) != "true" {
				return bad("turn_open must be true when present, got %s", clip(mem.Value))
			}
			m.TurnOpen = true
		case "response_id":
			s, ok := jsonString(mem.Value)
			if !ok || s == "" {
				return bad("response_id must be a non-empty string, got %s", clip(mem.Value))
			}
			m.ResponseID = s
		default:
			return bad("unknown member %s", strconv.Quote(mem.Key))
		}
	}
	return m, nil
}

// encode writes the member (nil when there is nothing to write). Claims
// of calls no longer awaited are left out: an output recorded answers its
// claim.
func (m runMeta) encode(pending []string) json.RawMessage {
	var cs []member
	for _, id := range pending {
		if c, ok := m.Claims[id]; ok {
			cs = append(cs, member{Key: id, Value: encodeObject([]member{
				{Key: "at", Value: encodeString(c.At)},
				{Key: "by", Value: encodeString(c.By)},
				{Key: "token", Value: encodeString(c.Token)},
			})})
		}
	}
	var ms []member
	if len(cs) > 0 {
		slices.SortFunc(cs, func(a, b member) int { return strings.Compare(a.Key, b.Key) })
		ms = append(ms, member{Key: "claims", Value: encodeObject(cs)})
	}
	if m.ResponseID != "" {
		ms = append(ms, member{Key: "response_id", Value: encodeString(m.ResponseID)})
	}
	if m.TurnOpen {
		ms = append(ms, member{Key: "turn_open", Value: json.RawMessage("true")})
	}
	if len(ms) == 0 {
		return nil
	}
	return encodeObject(ms)
}

// Claims returns the calls claimed and not yet answered, in the order they
// await. A process that loads the checkpoint finds each of them in doubt,
// unless it made the claim itself (Run.InDoubt).
func (cp *Checkpoint) Claims() []Claim {
	var out []Claim
	for _, id := range cp.pendingIDs() {
		if c, ok := cp.run.Claims[id]; ok {
			at, _ := time.Parse(time.RFC3339, c.At)
			out = append(out, Claim{CallID: id, At: at, By: c.By})
		}
	}
	return out
}

// isClaimed reports whether call id is claimed and still awaited.
func (cp *Checkpoint) isClaimed(id string) bool {
	_, ok := cp.run.Claims[id]
	return ok && slices.Contains(cp.pendingIDs(), id)
}

func (cp *Checkpoint) setClaim(id, by string, at time.Time) {
	if cp.run.Claims == nil {
		cp.run.Claims = map[string]claimRec{}
	}
	cp.run.Claims[id] = claimRec{At: at.UTC().Truncate(time.Second).Format(time.RFC3339), By: by, Token: rand.Text()}
}

// defaultOwner names this process in its claims.
func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}
