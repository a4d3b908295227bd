// Package lostreply is the shared part of the adapters' lost-reply tests
// (issue 36, item 1): a faultproxy.Proxy lets a write's request through,
// waits for the server's reply (the write has run) and closes the
// connection instead of forwarding it. The call must then return an error
// wrapping session.ErrOutcomeUnknown, or have written nothing: a plain
// error means "nothing was written", and a caller that retries on it
// duplicates an append or pops a second item.
//
// It classifies each call's outcome (Classify), counts the outcomes in a
// Markdown table for the log and docs/reliability.md (Table), and, for the
// adapters whose writes take several round trips, finds a write's commit
// request with a dry run (FindCommit) and loses its reply (LoseNth).
package lostreply

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentsessions/sessions/internal/testkit/faultproxy"
	"github.com/agentsessions/sessions/session"
)

// Outcome is what one call did under a lost reply.
type Outcome int

// The outcomes, in the order of the table's columns.
const (
	TookUnknown Outcome = iota // took effect, ErrOutcomeUnknown: as promised
	TookPlain                  // took effect, error without ErrOutcomeUnknown: the bug
	TookNil                    // took effect, no error: the adapter recovered the outcome (or the reply was not lost)
	NotUnknown                 // did not happen, ErrOutcomeUnknown: allowed
	NotPlain                   // did not happen, plain error: allowed
	NotNil                     // did not happen, no error: wrong
	NotInjected                // the proxy saw no matching request (or more than one)
	NumOutcomes                // how many outcomes there are
)

var names = [NumOutcomes]string{"took+unknown", "took+PLAIN", "took+nil", "none+unknown", "none+plain", "none+nil", "not-injected"}

// String is the outcome's name, as the table's header shows it.
func (o Outcome) String() string {
	if o < 0 || o >= NumOutcomes {
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
	return names[o]
}

// Bad reports whether the outcome fails a test whatever the adapter:
// TookPlain, NotNil and NotInjected. TookNil is not (an adapter may read
// the outcome back and report it); a test whose adapter cannot do that
// checks for it itself.
func (o Outcome) Bad() bool {
	return o == TookPlain || o == NotNil || o == NotInjected
}

// Classify returns the outcome of a call that returned err: took says
// whether the write took effect (what the server holds differs from
// before the call), injected whether the proxy lost exactly one reply.
// Only an err that wraps session.ErrOutcomeUnknown counts as unknown.
func Classify(took, injected bool, err error) Outcome {
	unknown := errors.Is(err, session.ErrOutcomeUnknown)
	switch {
	case !injected:
		return NotInjected
	case took && err == nil:
		return TookNil
	case took && unknown:
		return TookUnknown
	case took:
		return TookPlain
	case err == nil:
		return NotNil
	case unknown:
		return NotUnknown
	default:
		return NotPlain
	}
}

// Table counts outcomes per key, for the log (and docs/reliability.md).
// A key is the cells of its row's leading columns joined with "|" (as
// "standalone|native|AddItems"). Its methods are safe for concurrent use.
type Table struct {
	mu      sync.Mutex
	columns []string
	commit  bool
	rows    map[string]*[NumOutcomes]int
	commits map[string]string
}

// NewTable returns an empty table whose rows start with the named
// columns, one per part of a key.
func NewTable(columns ...string) *Table {
	return &Table{columns: columns, rows: map[string]*[NumOutcomes]int{}, commits: map[string]string{}}
}

// WithCommit adds a "commit" column after the key's columns (the commit
// request a dry run found, set with SetCommit) and returns t.
func (t *Table) WithCommit() *Table {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.commit = true
	return t
}

// SetCommit sets the commit column of key's row (see WithCommit), as
// "3 of 4".
func (t *Table) SetCommit(key, commit string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.commits[key] = commit
}

// Add counts one outcome o for key.
func (t *Table) Add(key string, o Outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rows[key] == nil {
		t.rows[key] = new([NumOutcomes]int)
	}
	t.rows[key][o]++
}

// String renders the table in Markdown: a header, a row per key (sorted)
// with its count of each outcome, and a last row "all" with the totals.
func (t *Table) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.rows))
	for k := range t.rows {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	lead := slices.Clone(t.columns)
	if t.commit {
		lead = append(lead, "commit")
	}
	var b strings.Builder
	b.WriteString("| " + strings.Join(lead, " | ") + " |")
	for _, n := range names {
		b.WriteString(" " + n + " |")
	}
	b.WriteString("\n|" + strings.Repeat("---|", len(lead)+int(NumOutcomes)) + "\n")
	var total [NumOutcomes]int
	for _, k := range keys {
		cells := strings.Split(k, "|")
		if t.commit {
			cells = append(cells, t.commits[k])
		}
		b.WriteString("| " + strings.Join(cells, " | ") + " |")
		for i, n := range t.rows[k] {
			total[i] += n
			fmt.Fprintf(&b, " %d |", n)
		}
		b.WriteString("\n")
	}
	b.WriteString("| all |" + strings.Repeat(" |", len(lead)-1))
	for _, n := range total {
		fmt.Fprintf(&b, " %d |", n)
	}
	b.WriteString("\n")
	return b.String()
}

// FindCommit is the dry run of a write that takes several round trips:
// it runs do with p counting the requests for which own reports true
// (never injecting), reads what the server holds with dump before each
// of them is forwarded (in the proxy's goroutine) and after do returns,
// and returns the ordinal of the request after whose reply it first
// differs from before the call (its commit), and how many such requests
// do sent. It fails t if do fails, a dump fails, or nothing changed; name
// is the write's, for the messages.
func FindCommit[S comparable](t testing.TB, p *faultproxy.Proxy, name string, own func(request []byte) bool, dump func() (S, error), do func() error) (commit, total int) {
	t.Helper()
	initial, err := dump()
	if err != nil {
		t.Fatalf("dry run of %s: %v", name, err)
	}
	var mu sync.Mutex
	var states []S // states[i]: before request i+1 was forwarded
	var dumpErr error
	p.Set(faultproxy.LoseReply, func(req []byte) bool {
		if own(req) {
			s, err := dump()
			mu.Lock()
			states = append(states, s)
			if dumpErr == nil {
				dumpErr = err
			}
			mu.Unlock()
		}
		return false // count, never inject
	})
	err = do()
	p.Set(faultproxy.None, nil)
	if err != nil {
		t.Fatalf("dry run of %s: %v", name, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if dumpErr != nil {
		t.Fatalf("dry run of %s: %v", name, dumpErr)
	}
	final, err := dump()
	if err != nil {
		t.Fatalf("dry run of %s: %v", name, err)
	}
	states = append(states, final)
	for i := 1; i < len(states); i++ {
		if states[i] != initial {
			return i, len(states) - 1
		}
	}
	t.Fatalf("%s changed nothing", name)
	return 0, 0
}

// LoseNth makes p lose the reply of the nth request (from 1) for which
// own reports true, runs do, heals p, and returns how many faults p
// injected meanwhile and do's error.
func LoseNth(p *faultproxy.Proxy, own func(request []byte) bool, n int, do func() error) (injected int64, err error) {
	var seen atomic.Int64
	n0 := p.Injected.Load()
	p.Once(faultproxy.LoseReply, func(req []byte) bool {
		return own(req) && seen.Add(1) == int64(n)
	})
	err = do()
	p.Set(faultproxy.None, nil)
	return p.Injected.Load() - n0, err
}
