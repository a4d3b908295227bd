package adapters_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
)

// hiddenValue is the value of a mistyped or unknown option in the tests
// below: no error or redaction may show it (issue 36 item 3).
const hiddenValue = "Zs3cretPWq9"

// TestOpenHidesUnknownOptionValues: an option no backend knows, on every
// backend's real server, is refused or passed on, and whatever error
// Open returns names its key only, never its value.
func TestOpenHidesUnknownOptionValues(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	withQuery := func(base, q string) string {
		if strings.Contains(base, "?") {
			return base + "&" + q
		}
		return base + "?" + q
	}
	bases := map[string]func() string{
		"sqlite-abs": func() string { return "sqlite://" + filepath.Join(dir, "a.db") },
		"sqlite-rel": func() string { return "sqlite:" + filepath.Join(dir, "b.db") },
		"memory":     func() string { return "memory://" },
		"postgres":   func() string { return testservers.Postgres(t) },
		"mongo":      func() string { return testservers.Mongo(t) },
		"redis":      func() string { return testservers.Redis(t) },
	}
	for name, base := range bases {
		t.Run(name, func(t *testing.T) {
			b := base()
			for _, q := range []string{"foo=" + hiddenValue, "passwrd=" + hiddenValue, "_pragma=key(" + hiddenValue + ")", "Foo=x" + hiddenValue + "%26y"} {
				dsn := withQuery(b, q)
				st, err := adapters.Open(ctx, dsn)
				if err == nil {
					_ = st.Close()
					t.Fatalf("Open accepted an unknown option (%s)", adapters.Redact(dsn))
				}
				if name != "postgres" { // PostgreSQL's server refuses a setting it does not know
					require.ErrorIs(t, err, adapters.ErrInvalidDSN, "%s: %v", name, err)
				}
				require.NotContains(t, err.Error(), hiddenValue, "Open's error shows the value")
				require.NotContains(t, adapters.Redact(dsn), hiddenValue, "Redact shows the value")
			}
		})
	}
}

// TestRedactEveryForm: Redact masks the credentials of every form of
// store URL or DSN it may be given.
func TestRedactEveryForm(t *testing.T) {
	for in, want := range map[string]string{
		"u:hunter22@h:5432/db":                         "u:xxxxx@h:5432/db",
		"sqlite:rel.db?foo=hunter22":                   "sqlite:rel.db?foo=xxxxx",
		"sqlite:rel.db?_pragma=key(hunter22)":          "sqlite:rel.db?_pragma=xxxxx",
		"sqlite:///abs.db?busy_timeout=1s&x=hunter22":  "sqlite:///abs.db?busy_timeout=1s&x=xxxxx",
		"postgres://h/db?foo=hunter22&sslmode=disable": "postgres://h/db?foo=xxxxx&sslmode=disable",
		"mongodb://h/db?replicaSet=rs0&zz=hunter22":    "mongodb://h/db?replicaSet=rs0&zz=xxxxx",
		"redis://h:6379/0?ttl=1h&passwrd=hunter22":     "redis://h:6379/0?ttl=1h&passwrd=xxxxx",
		"h/db?foo=hunter22":                            "h/db?foo=xxxxx",
		"host=h user=u dbname=d foo=hunter22":          "host=h user=u dbname=d foo=xxxxx",
		"sqlite::memory:":                              "sqlite::memory:",
	} {
		if got := adapters.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
