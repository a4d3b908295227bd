package lostreply

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentsessions/sessions/internal/testkit/faultproxy"
	"github.com/agentsessions/sessions/session"
)

func TestOutcomeClassify(t *testing.T) {
	plain := errors.New("refused")
	unknown := fmt.Errorf("write: %w", session.ErrOutcomeUnknown)
	for _, c := range []struct {
		took, injected bool
		err            error
		want           Outcome
		bad            bool
	}{
		{true, true, unknown, TookUnknown, false},
		{true, true, plain, TookPlain, true},
		{true, true, nil, TookNil, false},
		{false, true, unknown, NotUnknown, false},
		{false, true, plain, NotPlain, false},
		{false, true, nil, NotNil, true},
		{true, false, unknown, NotInjected, true},
		{false, false, nil, NotInjected, true},
	} {
		got := Classify(c.took, c.injected, c.err)
		if got != c.want || got.Bad() != c.bad {
			t.Errorf("Classify(%v, %v, %v) = %v (bad %v), want %v (bad %v)", c.took, c.injected, c.err, got, got.Bad(), c.want, c.bad)
		}
	}
	if s := TookPlain.String(); s != "took+PLAIN" {
		t.Errorf("TookPlain.String() = %q", s)
	}
	if s := NumOutcomes.String(); s != "Outcome(7)" {
		t.Errorf("NumOutcomes.String() = %q", s)
	}
}

func TestOutcomeTable(t *testing.T) {
	tb := NewTable("deployment", "layout", "operation")
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { tb.Add("standalone|native|AddItems", TookUnknown) })
	}
	wg.Wait()
	tb.Add("cluster|native|RemoveSession", NotPlain)
	want := "| deployment | layout | operation | took+unknown | took+PLAIN | took+nil | none+unknown | none+plain | none+nil | not-injected |\n" +
		"|---|---|---|---|---|---|---|---|---|---|\n" +
		"| cluster | native | RemoveSession | 0 | 0 | 0 | 0 | 1 | 0 | 0 |\n" +
		"| standalone | native | AddItems | 3 | 0 | 0 | 0 | 0 | 0 | 0 |\n" +
		"| all | | | 3 | 0 | 0 | 0 | 1 | 0 | 0 |\n"
	if got := tb.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	tb = NewTable("operation").WithCommit()
	tb.SetCommit("PopItem", "5 of 5")
	tb.Add("PopItem", TookNil)
	tb.Add("Clear", TookUnknown)
	want = "| operation | commit | took+unknown | took+PLAIN | took+nil | none+unknown | none+plain | none+nil | not-injected |\n" +
		"|---|---|---|---|---|---|---|---|---|\n" +
		"| Clear |  | 1 | 0 | 0 | 0 | 0 | 0 | 0 |\n" +
		"| PopItem | 5 of 5 | 0 | 0 | 1 | 0 | 0 | 0 | 0 |\n" +
		"| all | | 1 | 0 | 1 | 0 | 0 | 0 | 0 |\n"
	if got := tb.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// counter is a server of lines: "inc" adds one to its count, anything
// else does nothing; it answers each line with "ok".
func counter(t *testing.T) (addr string, count *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	count = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				r := bufio.NewScanner(c)
				for r.Scan() {
					if r.Text() == "inc" {
						count.Add(1)
					}
					if _, err := c.Write([]byte("ok\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), count
}

// exchange sends each line through addr, waiting for each reply.
func exchange(addr string, lines ...string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	r := bufio.NewReader(c)
	for _, l := range lines {
		if _, err := c.Write([]byte(l + "\n")); err != nil {
			return err
		}
		if _, err := r.ReadString('\n'); err != nil {
			return err
		}
	}
	return nil
}

func TestOutcomeFindCommitLoseNth(t *testing.T) {
	addr, count := counter(t)
	p, err := faultproxy.Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	all := func([]byte) bool { return true }
	dump := func() (int64, error) { return count.Load(), nil }
	write := func() error { return exchange(p.Addr(), "noop", "inc", "noop") }

	commit, total := FindCommit(t, p, "write", all, dump, write)
	if commit != 2 || total != 3 {
		t.Fatalf("FindCommit = %d of %d, want 2 of 3", commit, total)
	}

	before := count.Load()
	injected, err := LoseNth(p, all, commit, write)
	if o := Classify(count.Load() != before, injected == 1, err); o != TookPlain {
		t.Fatalf("lost commit reply: %v (injected %d, error %v), want %v", o, injected, err, TookPlain)
	}
}

func TestOutcomeWrites(t *testing.T) {
	ws := Writes("AppendWithCheckpoint")
	if len(ws) != nCommon+1 || ws[nCommon].Name != "AppendWithCheckpoint" || ws[1].Name != "AddItems(new session)" {
		t.Fatalf("Writes: %d writes, last %q", len(ws), ws[len(ws)-1].Name)
	}
	for _, w := range ws {
		if w.Setup == nil || w.Do == nil {
			t.Errorf("%s: no Setup or Do", w.Name)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Writes of an unknown name did not panic")
		}
	}()
	Writes("Nope")
}
