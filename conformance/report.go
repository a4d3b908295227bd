package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentsessions/sessions/session"
)

// Status is a clause's outcome.
type Status string

// Clause outcomes.
const (
	StatusPass Status = "pass"
	StatusFail Status = "fail"
	StatusSkip Status = "skip"
)

// Level grades a store, as LangGraph's checkpoint conformance does.
type Level string

// Levels, best first.
const (
	LevelFull        Level = "FULL"         // base, run-state and every standard capability pass
	LevelBasePartial Level = "BASE+PARTIAL" // base passes, and some capabilities pass
	LevelBase        Level = "BASE"         // only the base clauses pass
	LevelNone        Level = "NONE"         // a base clause fails
)

// StandardCapabilities are the capabilities a store needs for LevelFull.
// The others (run-context awareness, TTL, compaction) are graded when
// declared but are not required: they depend on the backend or the wrapper,
// not on storage quality.
var StandardCapabilities = session.Caps(session.CapLatest, session.CapReplace)

// ClauseResult is one clause's outcome.
type ClauseResult struct {
	Name     string        `json:"name"`
	Group    Group         `json:"group"`
	Status   Status        `json:"status"`
	Message  string        `json:"message,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// Report is the outcome of a run of the suite.
type Report struct {
	Store    string         `json:"store"`
	Declared []string       `json:"declared"`
	Level    Level          `json:"level"`
	Passed   int            `json:"passed"`
	Failed   int            `json:"failed"`
	Skipped  int            `json:"skipped"`
	Groups   map[Group]int  `json:"failed_by_group,omitempty"`
	Clauses  []ClauseResult `json:"clauses"`

	declared session.Capabilities
	tally    map[Group]*groupTally
}

type groupTally struct{ pass, fail, skip int }

func newReport(h Harness) *Report {
	d := h.Declared()
	r := &Report{Store: h.Name(), declared: d, tally: map[Group]*groupTally{}}
	for _, c := range d.List() {
		r.Declared = append(r.Declared, c.String())
	}
	return r
}

func (r *Report) add(res ClauseResult) {
	r.Clauses = append(r.Clauses, res)
	t := r.tally[res.Group]
	if t == nil {
		t = &groupTally{}
		r.tally[res.Group] = t
	}
	switch res.Status {
	case StatusPass:
		r.Passed++
		t.pass++
	case StatusFail:
		r.Failed++
		t.fail++
	default:
		r.Skipped++
		t.skip++
	}
}

// passedGroup reports whether a group ran at least one clause and failed none.
func (r *Report) passedGroup(g Group) bool {
	t := r.tally[g]
	return t != nil && t.fail == 0 && t.pass > 0
}

func (r *Report) finish() {
	r.Groups = map[Group]int{}
	for _, g := range sortedGroups(r.tally) {
		if f := r.tally[g].fail; f > 0 {
			r.Groups[g] = f
		}
	}
	for _, g := range []Group{GroupBase, GroupRunState} {
		if t := r.tally[g]; t != nil && t.fail > 0 {
			r.Level = LevelNone
			return
		}
	}
	if !r.passedGroup(GroupBase) {
		r.Level = LevelNone
		return
	}
	anyCap, allDeclared := false, true
	for _, c := range r.declared.List() {
		if r.passedGroup(groupFor(c)) {
			anyCap = true
		} else {
			allDeclared = false
		}
	}
	full := allDeclared
	for _, c := range StandardCapabilities.List() {
		full = full && r.declared.Has(c) && r.passedGroup(groupFor(c))
	}
	switch {
	case full:
		r.Level = LevelFull
	case anyCap:
		r.Level = LevelBasePartial
	default:
		r.Level = LevelBase
	}
}

// OK reports whether no clause failed.
func (r *Report) OK() bool { return r.Failed == 0 }

// Summary is a one-line account of the report.
func (r *Report) Summary() string {
	return fmt.Sprintf("level %s: %d passed, %d failed, %d skipped (declared: %s)",
		r.Level, r.Passed, r.Failed, r.Skipped, r.declared)
}

// JSON returns the report as indented JSON.
func (r *Report) JSON() ([]byte, error) { return json.MarshalIndent(r, "", "  ") }

// WriteText writes a human-readable report: one line per clause, then the
// summary.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "conformance report for %s\n", r.Store)
	for _, c := range r.Clauses {
		line := fmt.Sprintf("  %-4s  %-11s %s", strings.ToUpper(string(c.Status)), c.Group, c.Name)
		if c.Message != "" && c.Status != StatusPass {
			line += "  (" + firstLine(c.Message) + ")"
		}
		b.WriteString(line + "\n")
	}
	b.WriteString(r.Summary() + "\n")
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
