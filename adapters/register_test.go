package adapters

import (
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// withOpeners runs f with an empty registry, restoring the real one after.
func withOpeners(t *testing.T, f func()) {
	mu.Lock()
	saved := openers
	openers = map[string]URLOpener{}
	mu.Unlock()
	defer func() {
		mu.Lock()
		openers = saved
		mu.Unlock()
	}()
	f()
}

func TestRegister(t *testing.T) {
	withOpeners(t, func() {
		var got *url.URL
		o := URLOpenerFunc(func(_ context.Context, u *url.URL, _ Options) (Store, error) {
			got = u
			return nil, nil
		})
		Register("test", o)
		Register("test+tls", o)
		require.Equal(t, []string{"test", "test+tls"}, Schemes())

		require.PanicsWithValue(t, "adapters: Register called twice for scheme test", func() { Register("test", o) })
		require.PanicsWithValue(t, "adapters: Register opener is nil", func() { Register("other", nil) })
		for _, bad := range []string{"", "Test", "1x", "te st", "x:y", "x/"} {
			require.Panics(t, func() { Register(bad, o) }, bad)
		}
		require.Equal(t, []string{"test", "test+tls"}, Schemes(), "failed registrations leave nothing behind")

		_, err := Open(context.Background(), "TEST://host/x?a=1")
		require.NoError(t, err)
		require.Equal(t, "host", got.Host, "schemes match case-insensitively")
	})
}

func TestOpenWithNothingRegistered(t *testing.T) {
	withOpeners(t, func() {
		_, err := Open(context.Background(), "memory://")
		require.ErrorIs(t, err, ErrInvalidDSN)
		require.Contains(t, err.Error(), "adapters/all")
	})
}
