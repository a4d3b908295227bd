package redis

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/internal/testkit/faultproxy"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// TestWriteNotResent loses the reply of a DEL after the server ran it.
// go-redis resends a command after such an error (io.EOF) unless the
// command is NoRetry, and a resent DEL is a second DEL: here another
// client appends between the two (while the client dials the connection
// of its resend), and the resend deleted that append although it came
// after the call's only intended effect. The campaign of
// internal/testkit/linearize saw it as reads of an empty history under
// connection cuts. The call may fail; it must not act twice.
func TestWriteNotResent(t *testing.T) {
	for name, del := range map[string]func(ctx context.Context, st *Store, s *Session) error{
		"Clear":         func(ctx context.Context, _ *Store, s *Session) error { return s.Clear(ctx) },
		"RemoveSession": func(ctx context.Context, st *Store, s *Session) error { return st.RemoveSession(ctx, s.SessionID()) },
	} {
		t.Run(name, func(t *testing.T) {
			o, err := goredis.ParseURL(testservers.Redis(t))
			require.NoError(t, err)
			proxy, err := faultproxy.Start(o.Addr)
			require.NoError(t, err)
			t.Cleanup(func() { _ = proxy.Close() })

			opts := Options{KeyPrefix: uniquePrefix(t)}
			peer := newStore(t, standaloneClient(t), opts)
			ctx := context.Background()
			later := session.MustItem(`{"later":true}`)
			var lost, appended atomic.Bool // the DEL's reply was lost; the peer appended on the next dial
			o.Addr = proxy.Addr()
			o.MinRetryBackoff, o.MaxRetryBackoff = time.Millisecond, 5*time.Millisecond
			o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if lost.CompareAndSwap(true, false) {
					ps, err := peer.Session("s")
					if err == nil {
						err = ps.AddItems(ctx, []session.Item{later})
					}
					if err != nil {
						t.Errorf("the peer's append: %v", err)
					}
					appended.Store(true)
				}
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}
			c := goredis.NewClient(o)
			t.Cleanup(func() { _ = c.Close() })
			st := newStore(t, c, opts)
			s, err := st.Session("s")
			require.NoError(t, err)
			require.NoError(t, s.AddItems(ctx, []session.Item{session.MustItem(`{"first":true}`)}))

			proxy.Once(faultproxy.LoseReply, func(req []byte) bool {
				if !bytes.Contains(bytes.ToLower(req), []byte("\r\ndel\r\n")) {
					return false
				}
				lost.Store(true)
				return true
			})
			err = del(ctx, st, s)
			require.EqualValues(t, 1, proxy.Injected.Load(), "the DEL's reply was lost")
			got, rerr := s.Items(ctx) // dials, if the DEL was not resent
			require.NoError(t, rerr)
			require.True(t, appended.Load())
			var texts []string
			for _, it := range got {
				texts = append(texts, it.String())
			}
			require.Equal(t, []string{later.String()}, texts,
				"the append after the DEL ran is gone (the call returned %v): the DEL was resent", err)
			require.Error(t, err, "the reply was lost: the call cannot know it succeeded")
		})
	}
}
