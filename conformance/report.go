package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentsessions/sessions/conformance/heldwrite"
	"github.com/agentsessions/sessions/conformance/suite"
	"github.com/agentsessions/sessions/session"
)

// Status is a clause's outcome.
type Status = suite.Status

// Clause outcomes.
const (
	StatusPass = suite.StatusPass
	StatusFail = suite.StatusFail
	StatusSkip = suite.StatusSkip
)

// Group names a set of clauses graded together: a part's required clauses
// (GroupBase, GroupHeldWrite) or one capability's.
type Group = suite.Group

// Required groups.
const (
	GroupBase      = suite.GroupBase // the contract's base clauses
	GroupHeldWrite = heldwrite.Group // every held-write clause
)

// Level grades a store, or one part of the suite, as LangGraph's
// checkpoint conformance does.
type Level string

// Levels, best first.
const (
	LevelFull        Level = "FULL"         // every required clause and every declared and standard capability pass
	LevelBasePartial Level = "BASE+PARTIAL" // the required clauses pass, and some capabilities
	LevelBase        Level = "BASE"         // only the required clauses pass
	LevelNone        Level = "NONE"         // a required clause failed, was skipped or did not run
)

// StandardCapabilities are the capabilities the contract needs for
// LevelFull. The others (run-context awareness, TTL, compaction) are graded
// when declared but are not required: they depend on the backend or the
// wrapper, not on storage quality.
var StandardCapabilities = session.Caps(session.CapLatest, session.CapReplace)

// ClauseResult is one clause's outcome.
type ClauseResult struct {
	Part     string        `json:"part"`
	Name     string        `json:"name"`
	Group    Group         `json:"group"`
	Status   Status        `json:"status"`
	Message  string        `json:"message,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// PartReport grades one part of the suite.
type PartReport struct {
	Name string `json:"name"`
	// Total is the number of clauses the part has; Passed, Failed and
	// Skipped count those that ran (or were skipped), and Total minus
	// their sum did not run (Options.Run).
	Total   int   `json:"total"`
	Passed  int   `json:"passed"`
	Failed  int   `json:"failed"`
	Skipped int   `json:"skipped"`
	Level   Level `json:"level"`
	// Reason says what keeps the level below FULL.
	Reason  string         `json:"reason,omitempty"`
	Clauses []ClauseResult `json:"clauses"`
}

// Report is the outcome of a run of the suite: one PartReport per part,
// and a Level for the store.
type Report struct {
	Store    string   `json:"store"`
	Declared []string `json:"declared"`
	// Level is the contract's level, or NONE when another part that ran
	// did not pass all its required clauses.
	Level   Level         `json:"level"`
	Reason  string        `json:"reason,omitempty"`
	Passed  int           `json:"passed"`
	Failed  int           `json:"failed"`
	Skipped int           `json:"skipped"`
	Parts   []*PartReport `json:"parts"`
	// Clauses are every part's results, in order.
	Clauses []ClauseResult `json:"-"`

	declared session.Capabilities
}

func newReport(h Harness) *Report {
	d := h.Declared()
	r := &Report{Store: h.Name(), declared: d, Declared: []string{}}
	for _, c := range d.List() {
		r.Declared = append(r.Declared, c.String())
	}
	return r
}

// Part returns the report of the part named name, or nil if it did not run.
func (r *Report) Part(name string) *PartReport {
	for _, p := range r.Parts {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func (r *Report) add(p part, h Harness, res []suite.Result) {
	all := p.clauses()
	pr := &PartReport{Name: p.name, Total: len(all)}
	for _, x := range res {
		c := ClauseResult{Part: p.name, Name: x.Name, Group: x.Group, Status: x.Status, Message: x.Message, Duration: x.Duration}
		pr.Clauses = append(pr.Clauses, c)
		r.Clauses = append(r.Clauses, c)
		switch x.Status {
		case StatusPass:
			pr.Passed++
		case StatusFail:
			pr.Failed++
		default:
			pr.Skipped++
		}
	}
	declared := p.harness(h).Declared()
	graded := declared
	if p.base != GroupBase {
		graded = 0 // held-write grades no capability
	}
	pr.Level, pr.Reason = grade(all, pr.Clauses, p.base, declared, graded, p.standard)
	r.Passed += pr.Passed
	r.Failed += pr.Failed
	r.Skipped += pr.Skipped
	r.Parts = append(r.Parts, pr)
}

// grade grades one part: its required group, then the group of each
// capability in graded. A group passes when every clause of it that
// applies to the declared capabilities (suite.Clause.Applies: not only
// those that ran) passed; a skip or a clause left out by Options.Run is no
// pass. A clause that needs a capability the harness does not declare (a
// held-write clause of the stored mode on a store without checkpoints,
// checkpoints/ttl on a store without ttl) does not count.
func grade(all []suite.Clause, res []ClauseResult, base Group, declared, graded, standard session.Capabilities) (Level, string) {
	status := map[string]ClauseResult{}
	for _, c := range res {
		status[c.Name] = c
	}
	passed := func(g Group) (bool, string) {
		n := 0
		for _, cl := range all {
			if cl.Group != g || !cl.Applies(declared) {
				continue
			}
			c, ok := status[cl.Name]
			if ok && c.Status == StatusSkip && strings.HasPrefix(c.Message, suite.NotApplicable) {
				continue
			}
			n++
			switch {
			case !ok:
				return false, fmt.Sprintf("%s clause %s did not run", g, cl.Name)
			case c.Status == StatusFail:
				return false, fmt.Sprintf("%s clause %s failed", g, cl.Name)
			case c.Status == StatusSkip:
				return false, fmt.Sprintf("%s clause %s skipped (%s)", g, cl.Name, firstLine(c.Message))
			}
		}
		if n == 0 {
			return false, fmt.Sprintf("no %s clause", g)
		}
		return true, ""
	}
	if ok, why := passed(base); !ok {
		return LevelNone, why
	}
	anyCap, full, reason := false, true, ""
	for _, c := range graded.List() {
		if ok, why := passed(suite.GroupFor(c)); ok {
			anyCap = true
		} else {
			full = false
			if reason == "" {
				reason = why
			}
		}
	}
	for _, c := range standard.List() {
		if !declared.Has(c) {
			full = false
			if reason == "" {
				reason = "standard capability " + c.String() + " not declared"
			}
		}
	}
	switch {
	case full:
		return LevelFull, ""
	case anyCap:
		return LevelBasePartial, reason
	default:
		return LevelBase, reason
	}
}

func (r *Report) finish() {
	if len(r.Parts) == 0 {
		r.Level, r.Reason = LevelNone, "no part ran"
		return
	}
	r.Level, r.Reason = r.Parts[0].Level, r.Parts[0].Reason
	if r.Level == LevelNone {
		r.Reason = r.Parts[0].Name + ": " + r.Reason
		return
	}
	for _, p := range r.Parts[1:] {
		if p.Level == LevelNone {
			r.Level, r.Reason = LevelNone, p.Name+": "+p.Reason
			return
		}
	}
}

// OK reports whether no clause failed.
func (r *Report) OK() bool { return r.Failed == 0 }

// Summary is a one-line account of the report: the level, then each part's
// level and passed/failed/skipped counts out of its clauses.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "level %s", r.Level)
	for i, p := range r.Parts {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%s %s %d/%d/%d of %d", sep, p.Name, p.Level, p.Passed, p.Failed, p.Skipped, p.Total)
	}
	fmt.Fprintf(&b, " (passed/failed/skipped; declared: %s)", r.declared)
	if r.Reason != "" {
		fmt.Fprintf(&b, "; not higher: %s", r.Reason)
	}
	return b.String()
}

// JSON returns the report as indented JSON.
func (r *Report) JSON() ([]byte, error) { return json.MarshalIndent(r, "", "  ") }

// WriteText writes a human-readable report: each part's clauses, one line
// per clause, then one line per part with its grade, then the level.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "conformance report for %s (declared: %s)\n", r.Store, r.declared)
	for _, p := range r.Parts {
		fmt.Fprintf(&b, "\n%s: %d clauses\n", p.Name, p.Total)
		for i := 0; i < len(p.Clauses); i++ {
			c := p.Clauses[i]
			if c.Status == StatusSkip && strings.HasPrefix(c.Message, "not run: ") {
				// An interrupted run: one line for the clauses left.
				n := 1
				for i+n < len(p.Clauses) && p.Clauses[i+n].Message == c.Message {
					n++
				}
				fmt.Fprintf(&b, "  SKIP  %d clauses from %s on (%s)\n", n, c.Name, c.Message)
				i += n - 1
				continue
			}
			line := fmt.Sprintf("  %-4s  %-11s %s", strings.ToUpper(string(c.Status)), c.Group, c.Name)
			if c.Message != "" && c.Status != StatusPass {
				line += "  (" + firstLine(c.Message) + ")"
			}
			b.WriteString(line + "\n")
		}
	}
	b.WriteString("\n")
	for _, p := range r.Parts {
		line := fmt.Sprintf("%-31s %-12s %3d passed, %d failed, %d skipped of %d", p.Name, p.Level, p.Passed, p.Failed, p.Skipped, p.Total)
		if p.Reason != "" {
			line += "  (" + p.Reason + ")"
		}
		b.WriteString(line + "\n")
	}
	fmt.Fprintf(&b, "level %s\n", r.Level)
	_, err := io.WriteString(w, b.String())
	return err
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
