package adapters_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/all"
	"github.com/agentsessions/sessions/session"
)

func TestSchemesListsEveryBackend(t *testing.T) {
	require.Equal(t, []string{
		"memory", "mongodb", "mongodb+srv", "postgres", "postgresql",
		"redis", "redis+cluster", "redis+sentinel",
		"rediss", "rediss+cluster", "rediss+sentinel",
		"sqlite", "unix",
	}, adapters.Schemes())
}

func TestOpenRefusesBadURLs(t *testing.T) {
	ctx := context.Background()
	for _, dsn := range []string{
		"", "   ", "nocolon", "ftp://x", "sqlite://", "sqlite:///tmp/x.db?unknown=1",
		"sqlite:///tmp/x.db?busy_timeout=soon", "memory://?ttl=forever", "memory://?ttl=-1s",
		"memory://?ttl=1h&ttl=2h", "memory://?ttl=%zz", "sqlite:rel#frag.db",
		"redis://127.0.0.1:1/0?layout=sideways", "redis://127.0.0.1:1/0?ttl=x",
		"redis://127.0.0.1:1/0?refresh_on_read=maybe", "redis://127.0.0.1:1/0?key_prefix=a{b}",
		"redis://127.0.0.1:1/0?max_batch_bytes=lots",
		"mongodb://127.0.0.1:1/db?max_batch_bytes=-5", "mongodb://127.0.0.1:1/db?ttl=1h&sessions_collection=x&messages_collection=x",
		"%zz",
	} {
		_, err := adapters.Open(ctx, dsn)
		require.Error(t, err, dsn)
		require.True(t, errors.Is(err, adapters.ErrInvalidDSN), "%q: want ErrInvalidDSN, got %v", dsn, err)
	}
}

// A ';' in a query is refused with ErrInvalidDSN on every scheme (Go's
// url.URL.Query silently drops such a pair, so key_prefix=my;app wrote
// under the default prefix). Nothing is opened: the ports are closed.
func TestOpenRefusesSemicolons(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, dsn := range []string{
		"memory://?ttl=1h;x=1",
		"sqlite://" + filepath.Join(dir, "s.db") + "?messages_table=mine;x",
		"redis://127.0.0.1:1/0?key_prefix=my;app",
		"redis+cluster://127.0.0.1:1,127.0.0.1:2?key_prefix=my;app",
		"unix:///tmp/none.sock?db=0;key_prefix=x",
		"mongodb://127.0.0.1:1/db?sessions_collection=a;b",
		"mongodb+srv://example.invalid/db?ttl=1h;x",
	} {
		_, err := adapters.Open(ctx, dsn)
		require.ErrorIs(t, err, adapters.ErrInvalidDSN, dsn)
		require.Contains(t, err.Error(), "';'", dsn)
	}
	_, err := os.Stat(filepath.Join(dir, "s.db"))
	require.ErrorIs(t, err, os.ErrNotExist, "a refused URL creates nothing")
}

// An option no one knows is refused, per scheme, before anything is
// opened; the message lists the scheme's own options.
func TestOpenRefusesUnknownOptions(t *testing.T) {
	ctx := context.Background()
	for dsn, known := range map[string]string{
		"memory://?tll=1h":                                "ttl, refresh_on_read",
		"sqlite:rel.db?message_table=x":                   "sessions_table, messages_table, busy_timeout",
		"mongodb://127.0.0.1:1/db?sessions_colection=x":   "sessions_collection",
		"mongodb://127.0.0.1:1/db?replicaSett=rs0":        "sessions_collection",
		"mongodb+srv://example.invalid/db?keyprefix=x":    "sessions_collection",
		"redis://127.0.0.1:1/0?keyprefix=x":               "",
		"redis+cluster://127.0.0.1:1?keyprefix=x":         "",
		"redis+sentinel://127.0.0.1:1?master_name=m&x=1":  "",
		"unix:///tmp/none.sock?db=0&keyprefix=x":          "",
		"rediss://127.0.0.1:1/0?dial_timeout=1s&tll=1h":   "",
		"rediss+cluster://127.0.0.1:1?pool_size=2&tll=1h": "",
	} {
		_, err := adapters.Open(ctx, dsn)
		require.ErrorIs(t, err, adapters.ErrInvalidDSN, dsn)
		require.Contains(t, err.Error(), known, dsn)
	}
}

// The DSNs of issue 10.1: pasXw0rds people forget to escape. Open's error
// holds neither the pasXw0rd nor a piece of it.
var leakyDSNs = map[string]string{
	"redis://:Pa%ssWord@127.0.0.1:1/0":             "Pa%ssWord",
	"redis://user:pasX w0rd@127.0.0.1:1/0":         "pasX w0rd",
	"redis://user:pa#sXw0rd@127.0.0.1:1/0":         "pa#sXw0rd",
	"redis://user:pa/sXw0rd@127.0.0.1:1/0":         "pa/sXw0rd",
	"redis://user:pa@sXw0rd@127.0.0.1:1/0":         "pa@sXw0rd",
	"redis://user:pa?sXw0rd@127.0.0.1:1/0":         "pa?sXw0rd",
	"redis://user:s3cret@127.0.0.1:1/0?layout=bad": "s3cret",
	"mongodb://u:Pa%ssWord@127.0.0.1:1/db":         "Pa%ssWord",
	"mongodb://u:pa#sXw0rd@127.0.0.1:1/db":         "pa#sXw0rd",
	"mongodb://u:hunter22@127.0.0.1:1/db?tll=1":    "hunter22",
	"redis+cluster://u:pa%zzword@127.0.0.1:1":      "pa%zzword",
	"rediss+sentinel://u:se cret@127.0.0.1:1/0":    "se cret",
	"unix://u:pa%word@/tmp/none.sock?db=0":         "pa%word",
	"redis://u:pa\x7fword@127.0.0.1:1/0":           "pa\x7fword",
	"nosuch://u:Pa%ssWord@127.0.0.1:1/0":           "Pa%ssWord",
	"redis://u:pa ss@127.0.0.1:1/0?key_prefix=a":   "pa ss",
}

func TestOpenNeverPrintsPasXw0rds(t *testing.T) {
	ctx := context.Background()
	for dsn, pasXw0rd := range leakyDSNs {
		_, err := adapters.Open(ctx, dsn)
		require.Error(t, err, dsn)
		msg := err.Error()
		for i := 0; i+4 <= len(pasXw0rd); i++ {
			require.NotContains(t, msg, pasXw0rd[i:i+4], "%q: the error shows part of the pasXw0rd: %s", dsn, msg)
		}
		require.Contains(t, msg, "xxxxx", "%q: the error names the URL, masked: %s", dsn, msg)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:Pa%ssWord@127.0.0.1:1/0":        "redis://:xxxxx@127.0.0.1:1/0",
		"redis://user:pa#ss@host:1/0":             "redis://user:xxxxx@host:1/0",
		"redis://user:pa@ss/w:rd@host:1/0?x=y":    "redis://user:xxxxx@host:1/0?x=xxxxx", // x is no known option
		"redis://user:pa@ss/w:rd@host:1/0?db=1":   "redis://user:xxxxx@host:1/0?db=1",
		"mongodb://u:p@h1:1,h2:2/db?replicaSet=r": "mongodb://u:xxxxx@h1:1,h2:2/db?replicaSet=r",
		"redis://user@host:1/0":                   "redis://user@host:1/0",
		"redis://host:1/0":                        "redis://host:1/0",
		"sqlite:///var/lib/s.db":                  "sqlite:///var/lib/s.db",
		"sqlite:rel:x@y.db":                       "sqlite:rel:x@y.db",
		"memory://":                               "memory://",
		"":                                        "",
	} {
		require.Equal(t, want, adapters.Redact(in), in)
	}
}

// Memory and SQLite stores declare exactly what their sessions implement
// (redis and mongo are checked in their packages, against servers).
func TestOpenedStoresWork(t *testing.T) {
	ctx := context.Background()
	for _, dsn := range []string{"memory://", "memory://?ttl=1h&refresh_on_read=true", "sqlite://" + filepath.Join(t.TempDir(), "s.db"), "sqlite::memory:"} {
		st, err := adapters.Open(ctx, dsn)
		require.NoError(t, err, dsn)
		s, err := st.Session("a:{b}")
		require.NoError(t, err)
		require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"a":1}`)}))
		items, err := s.Items(ctx)
		require.NoError(t, err)
		require.Len(t, items, 1)
		require.Equal(t, session.Probe(s), st.Declared(), "%s declares what its sessions implement", dsn)
		require.True(t, st.Declared().Has(session.CapLatest), dsn)
		l, ok := st.(adapters.Lister)
		require.True(t, ok)
		ids, err := l.ListSessions(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"a:{b}"}, ids)
		_, err = st.Session("")
		require.ErrorIs(t, err, session.ErrInvalidSessionID)
		require.NoError(t, st.Close())
	}
}

// ReadOnly on sqlite: a mistyped path is an error and no file appears.
func TestOpenReadOnlyCreatesNothing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "typo.db")
	_, err := adapters.OpenWith(ctx, "sqlite://"+path, adapters.Options{ReadOnly: true})
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestQuery(t *testing.T) {
	u, err := url.Parse("redis://h/0?ttl=90s&refresh_on_read=1&max_batch_bytes=7&dial_timeout=2s&addr=a&addr=b&layout=python")
	require.NoError(t, err)
	_, err = adapters.ParseQuery(u, "ttl", "refresh_on_read", "max_batch_bytes", "layout")
	require.ErrorIs(t, err, adapters.ErrInvalidDSN)
	require.Contains(t, err.Error(), `unknown option "addr" for redis (known: ttl, refresh_on_read, max_batch_bytes, layout)`)

	q, err := adapters.ParsePassthroughQuery(u, "ttl", "refresh_on_read", "max_batch_bytes", "layout", "key_prefix")
	require.NoError(t, err)
	d, err := q.Duration("ttl")
	require.NoError(t, err)
	require.Equal(t, "1m30s", d.String())
	b, err := q.Bool("refresh_on_read")
	require.NoError(t, err)
	require.True(t, b)
	n, err := q.Int("max_batch_bytes")
	require.NoError(t, err)
	require.Equal(t, 7, n)
	l, err := q.OneOf("layout", "native", "python")
	require.NoError(t, err)
	require.Equal(t, "python", l)
	require.False(t, q.Has("key_prefix"))
	require.Equal(t, "", q.Get("key_prefix"))
	require.Equal(t, "redis://h/0?addr=a&addr=b&dial_timeout=2s", q.DriverURL(u))

	for raw, want := range map[string]string{
		"x://?ttl=1h&ttl=2h":    "option ttl given 2 times",
		"x://?ttl=soon":         `option ttl="soon": want a non-negative duration such as 30m`,
		"x://?n=-1":             `option n="-1": want a non-negative integer`,
		"x://?b=maybe":          `option b="maybe": want true or false`,
		"x://?layout=sideways":  `option layout="sideways": want native or python`,
		"x://?ttl=1h;n=2":       "';'",
		"x://?ttl=1h%3":         "'%' not followed by two hex digits",
		"x://?ttl=1h&unknown=1": `unknown option "unknown" for x (known: ttl, n, b, layout)`,
	} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		q, err := adapters.ParseQuery(u, "ttl", "n", "b", "layout")
		if err == nil {
			_, err = q.Duration("ttl")
			if err == nil {
				_, err = q.Int("n")
			}
			if err == nil {
				_, err = q.Bool("b")
			}
			if err == nil {
				_, err = q.OneOf("layout", "native", "python")
			}
		}
		require.ErrorIs(t, err, adapters.ErrInvalidDSN, raw)
		require.True(t, strings.Contains(err.Error(), want), "%s: %v", raw, err)
	}
}

// The package documentation names every registered scheme, in its URL
// list and as the heading of an option section.
func TestDocNamesEveryScheme(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	doc := string(b)
	urls, rest, ok := strings.Cut(doc, "# Options")
	require.True(t, ok)
	options, _, ok := strings.Cut(rest, "# Passwords")
	require.True(t, ok)
	for _, s := range adapters.Schemes() {
		require.True(t, strings.Contains(urls, "//\t"+s+":"), "doc.go's URL list lacks %s", s)
		heading := false
		for _, sep := range []string{",", ":"} {
			heading = heading || strings.Contains(options, "// "+s+sep) || strings.Contains(options, " "+s+sep)
		}
		require.True(t, heading, "doc.go has no option section for %s", s)
	}
}

// TestOpenNeverPrintsACredential feeds every documented credential option
// of every scheme, and unknown options that look like one, through Open:
// whatever the backend or the option parser says, the value is masked.
func TestOpenNeverPrintsACredential(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const secret = "hunter2hunter2"
	for _, dsn := range []string{
		"postgres://u@127.0.0.1:1/db?password=" + secret + "&connect_timeout=1",
		"postgres://u@127.0.0.1:1/db?sslpassword=" + secret + "&connect_timeout=1",
		"postgres://u:" + secret + "@127.0.0.1:1/db?connect_timeout=1",
		"redis://127.0.0.1:1/0?password=" + secret,
		"redis://:" + secret + "@127.0.0.1:1/0",
		"redis+sentinel://127.0.0.1:1/mymaster?sentinel_password=" + secret,
		"redis://127.0.0.1:1/0?x_token=" + secret,
		"mongodb://127.0.0.1:1/db?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:" + secret + "&serverSelectionTimeoutMS=200",
		"mongodb://u:" + secret + "@127.0.0.1:1/db?serverSelectionTimeoutMS=200",
		"sqlite:///nonexistent-dir/x.db?password=" + secret,
		"memory://?api_key=" + secret,
	} {
		st, err := adapters.Open(ctx, dsn)
		if err == nil { // a lazy client: nothing said, nothing to check
			require.NoError(t, st.Close())
			continue
		}
		require.NotContains(t, err.Error(), secret, adapters.Redact(dsn))
		for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
			require.NotContains(t, e.Error(), secret, "an unwrapped error of %s", adapters.Redact(dsn))
		}
		require.NotContains(t, adapters.Redact(dsn), secret)
	}
}
