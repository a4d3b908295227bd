package postgres

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/session"
	"github.com/agentsessions/sessions/session/driver"
)

// withQuery returns the server URL with extra query options.
func withQuery(t *testing.T, scheme, extra string) string {
	t.Helper()
	u, err := url.Parse(serverURL(t))
	require.NoError(t, err)
	u.Scheme = scheme
	if extra != "" {
		if u.RawQuery != "" {
			u.RawQuery += "&"
		}
		u.RawQuery += extra
	}
	return u.String()
}

func TestURLOpener(t *testing.T) {
	ctx := context.Background()
	for _, scheme := range Schemes {
		t.Run(scheme, func(t *testing.T) {
			schema := freshSchema(t)
			c := &driver.CorruptLog{}
			st, err := adapters.OpenWith(ctx,
				withQuery(t, scheme, "schema="+schema+"&sessions_table=my_sessions&messages_table=my_messages&checkpoints_table=my_checkpoints&application_name=sessions-test"),
				adapters.Options{OnCorrupt: c.Handler()})
			require.NoError(t, err)
			defer st.Close()
			s, err := st.Session("a")
			require.NoError(t, err)
			require.Equal(t, session.Probe(s), st.Declared(), "declared = probed")
			require.Equal(t, session.Caps(session.CapLatest, session.CapReplace, session.CapVersionedReplace, session.CapCheckpoints, session.CapCheckpointCommit, session.CapFollow, session.CapAppendOnce), st.Declared())
			require.NoError(t, s.AddItems(ctx, numbered("u", 0, 2)))

			raw, ok := st.(driver.RawAppender)
			require.True(t, ok, "a URL store appends raw records")
			require.NoError(t, raw.AppendRaw(ctx, "a", []byte("not json")))
			got, err := s.Items(ctx)
			require.NoError(t, err)
			require.Equal(t, strs(numbered("u", 0, 2)), strs(got))
			require.Len(t, c.Reports("a"), 1, "adapters.Options.OnCorrupt receives the reports")

			l, ok := st.(adapters.Lister)
			require.True(t, ok, "a URL store lists its sessions")
			ids, err := l.ListSessions(ctx)
			require.NoError(t, err)
			require.Equal(t, []string{"a"}, ids)

			ck := s.(session.CheckpointCommitter)
			v, err := ck.AppendWithCheckpoint(ctx, numbered("u", 2, 3), "run", []byte("doc"), 0)
			require.NoError(t, err)
			require.Equal(t, int64(1), v)

			// The options named the tables.
			direct := openStore(t, Options{Schema: schema, SessionsTable: "my_sessions", MessagesTable: "my_messages", CheckpointsTable: "my_checkpoints"})
			require.Len(t, rawRows(t, direct, "a"), 4)
			var n int
			require.NoError(t, direct.Pool().QueryRow(ctx, `SELECT count(*) FROM `+quote(schema)+`.my_checkpoints`).Scan(&n))
			require.Equal(t, 1, n)

			remover, ok := st.(interface {
				RemoveSession(ctx context.Context, id string) error
			})
			require.True(t, ok, "the URL store removes sessions for the conformance check")
			require.NoError(t, remover.RemoveSession(ctx, "a"))
			names, err := ck.ListCheckpoints(ctx)
			require.NoError(t, err)
			require.Empty(t, names, "RemoveSession removed the checkpoints")
			require.Empty(t, rawRows(t, direct, "a"))
		})
	}
}

func TestURLRefusals(t *testing.T) {
	ctx := context.Background()
	for _, extra := range []string{
		"sessions_table=bad%20name",
		"messages_table=x;y",
		"schema=1x",
		"sessions_table=a&sessions_table=b",
		"schema=a;b",
		"checkpoints_table=bad%20name",
		"checkpoints_table=agent_messages",
	} {
		_, err := adapters.Open(ctx, withQuery(t, "postgres", extra))
		require.ErrorIs(t, err, adapters.ErrInvalidDSN, extra)
	}
	// pgx's own options are pgx's to refuse.
	_, err := adapters.Open(ctx, withQuery(t, "postgres", "sslmode=bogus"))
	require.ErrorIs(t, err, adapters.ErrInvalidDSN)
}

// TestURLReadOnly: adapters.Options.ReadOnly creates nothing, so a database
// without the tables is an error, not an empty store.
func TestURLReadOnly(t *testing.T) {
	ctx := context.Background()
	_, err := adapters.OpenWith(ctx, withQuery(t, "postgresql", "schema="+freshSchema(t)), adapters.Options{ReadOnly: true})
	require.ErrorIs(t, err, ErrNoSchema)
}

// TestURLPasswordNotInErrors: a wrong password or an unreachable server
// gives an error that does not hold the password.
func TestURLPasswordNotInErrors(t *testing.T) {
	ctx := context.Background()
	const secret = "s3cr3t-pa55word"
	for _, dsn := range []string{
		"postgres://app:" + secret + "@127.0.0.1:1/db?connect_timeout=2",
		"postgres://app:" + secret + "@127.0.0.1:1/db?sslmode=bogus",
		"postgresql://app:" + secret + "@127.0.0.1:1/db?schema=bad%20name",
	} {
		_, err := adapters.Open(ctx, dsn)
		require.Error(t, err, dsn)
		require.NotContains(t, err.Error(), secret, "the password leaked into %q", err)
		_, err = Open(ctx, dsn, Options{})
		require.Error(t, err)
		require.False(t, strings.Contains(err.Error(), secret), "the password leaked into %q", err)
	}
}
