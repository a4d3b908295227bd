// Package errorstrings checks that the library's errors say each thing
// once: no "pkg: " prefix repeated down a chain, as in
// "session: item 1 is not a JSON object: session: item is not a JSON object".
package errorstrings

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/all"
	"github.com/agentsessions/sessions/adapters/memory"
	"github.com/agentsessions/sessions/adapters/sqlite"
	"github.com/agentsessions/sessions/encrypted"
	"github.com/agentsessions/sessions/history"
	"github.com/agentsessions/sessions/runstate"
	"github.com/agentsessions/sessions/session"
)

// prefixes are the packages' error prefixes.
var prefixes = []string{"session", "sqlite", "redis", "postgres", "mongo", "adapters", "runstate", "encrypted", "history", "memory", "legacy", "open", "sessionctl"}

var prefixRE = regexp.MustCompile(`(?:^|: )(` + strings.Join(prefixes, "|") + `): `)

// repeated returns a prefix msg holds twice, or "".
func repeated(msg string) string {
	seen := map[string]bool{}
	for _, m := range prefixRE.FindAllStringSubmatch(msg, -1) {
		if seen[m[1]] {
			return m[1]
		}
		seen[m[1]] = true
	}
	return ""
}

func TestRepeatedFinds(t *testing.T) {
	for msg, want := range map[string]string{
		"session: item 1 is not a JSON object: session: item is not a JSON object: invalid JSON": "session",
		"open redis://h/0: redis: open redis://h/0: WRONGPASS":                                   "",
		"redis: open: redis: dial":                                       "redis",
		"sqlite: open \"x\": directory \"y\": no such file or directory": "",
	} {
		if got := repeated(msg); got != want {
			t.Errorf("repeated(%q) = %q, want %q", msg, got, want)
		}
	}
}

// TestNoRepeatedPrefix provokes the errors a user meets first (bad items,
// bad URLs and paths, bad run-state documents, a wrong key, a closed
// store) and checks each message for a repeated package prefix.
func TestNoRepeatedPrefix(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	_, err := session.ParseItems(`{"a":1}`, `not json`)
	add(err)
	_, err = session.ParseItems(`[1]`)
	add(err)
	_, err = session.ParseItem(strings.Repeat("[", 10001))
	add(err)
	dir := t.TempDir()
	for _, p := range []string{filepath.Join(dir, "nope", "x.db"), dir, "sqlite:///x.db"} {
		_, err := sqlite.OpenFile(ctx, p, sqlite.Options{})
		add(err)
		_, err = sqlite.OpenFile(ctx, p, sqlite.Options{ReadOnly: true})
		add(err)
	}
	for _, u := range []string{"", "nope://x", "sqlite://host/x.db", "sqlite:///" + filepath.Join(dir, "nope", "x.db"),
		"redis://127.0.0.1:1/0?dial_timeout=100ms", "redis://h/0?bogus=1", "postgres://u@127.0.0.1:1/db?connect_timeout=1",
		"memory://?x=1", "mongodb://127.0.0.1:1/db?bogus=1", "redis://%zz"} {
		st, err := adapters.Open(ctx, u)
		if err == nil {
			st.Close()
		}
		add(err)
	}
	corpus, _ := filepath.Glob(filepath.Join("..", "..", "..", "runstate", "testdata", "fuzz", "FuzzLoad", "*"))
	for _, f := range corpus {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// A corpus file is "go test fuzz v1" then []byte("...").
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			_, err := runstate.Load(b[i+1:])
			add(err)
		}
	}
	_, err = runstate.Load([]byte(`{"$schemaVersion":"9.9"}`))
	add(err)
	mem := memory.New(memory.Options{})
	s, _ := mem.Session("s")
	w, _ := encrypted.New(s, encrypted.Options{Keys: []encrypted.Key{{ID: "k", Secret: "a"}}})
	add(session.Append(ctx, w, []session.Item{session.MustItem(`{"a":1}`)}))
	wrong, _ := encrypted.New(s, encrypted.Options{Keys: []encrypted.Key{{ID: "k", Secret: "b"}}})
	_, err = session.All(ctx, wrong)
	add(err)
	_, err = history.ModelInput(ctx, s, -1)
	add(err)
	_, err = history.ForModel([]session.Item{session.MustItem(`{"a":NaN}`)})
	add(err)
	mem.Close()
	add(session.Append(ctx, s, []session.Item{session.MustItem(`{"a":1}`)}))
	st, err := sqlite.OpenFile(ctx, filepath.Join(dir, "ok.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ss, _ := st.Session("s")
	st.Close()
	add(ss.AddItems(ctx, []session.Item{session.MustItem(`{"a":1}`)}))
	if len(errs) < 30 {
		t.Fatalf("only %d errors provoked", len(errs))
	}
	for _, err := range errs {
		if p := repeated(err.Error()); p != "" {
			t.Errorf("%q repeats %q", err, p+": ")
		}
	}
	t.Logf("%d error strings checked", len(errs))
}
