package reliability

import (
	"context"
	"crypto/x509"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentsessions/sessions/adapters"
	"github.com/agentsessions/sessions/internal/testkit/testservers"
	"github.com/agentsessions/sessions/session"
)

// roundTrip appends a batch through dsn and reads it back.
func roundTrip(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	st, err := adapters.Open(ctx, dsn)
	require.NoError(t, err)
	defer st.Close()
	s, err := st.Session(uniq("tls"))
	require.NoError(t, err)
	its, err := session.ParseItems(`{"role":"user","content":"over TLS"}`)
	require.NoError(t, err)
	require.NoError(t, s.AddItems(ctx, its))
	got, err := s.Items(ctx)
	require.NoError(t, err)
	require.Len(t, got, 1)
}

// refused opens dsn, expects a failure, and returns it with how long it took.
func refused(t *testing.T, dsn string) (time.Duration, error) {
	t.Helper()
	began := time.Now()
	st, err := adapters.Open(context.Background(), dsn)
	if err == nil {
		_ = st.Close()
		t.Fatalf("%s opened", dsn)
	}
	return time.Since(began), err
}

// TestRedisTLS: rediss:// to a loopback redis-server whose certificate a
// throwaway CA signed. Verification is on by default; the CA is given with
// tls_ca_file; go-redis's skip_verify=true turns verification off, by name.
func TestRedisTLS(t *testing.T) {
	srv := testservers.NewRedisTLSServer(t)
	base := srv.TLSURL()

	took, err := refused(t, base)
	var unknown x509.UnknownAuthorityError
	require.True(t, errors.As(err, &unknown), "an unknown CA is a certificate error: %v", err)
	require.Contains(t, err.Error(), "tls_ca_file", "the error says what to do")
	t.Logf("unverified certificate refused in %v: %v", took, err)

	roundTrip(t, base+"?tls_ca_file="+url.QueryEscape(srv.TLS.CA))
	roundTrip(t, base+"?skip_verify=true")

	other := testservers.NewTLSFiles(t)
	_, err = refused(t, base+"?tls_ca_file="+url.QueryEscape(other.CA))
	require.True(t, errors.As(err, &unknown), "another CA does not vouch for the server: %v", err)

	_, err = adapters.Open(context.Background(), base+"?tls_ca_file=/nonexistent/ca.pem")
	require.ErrorIs(t, err, adapters.ErrInvalidDSN)

	// rediss:// to the plain port: a TLS hint, not a long wait.
	took, err = refused(t, strings.Replace(srv.URL(), "redis://", "rediss://", 1))
	require.Contains(t, err.Error(), "use redis://", "%v", err)
	t.Logf("TLS to a plain server refused in %v: %v", took, err)
}

// TestMongoTLS: the Mongo-wire server over TLS with a throwaway CA; the
// driver verifies certificates unless tlsInsecure=true.
func TestMongoTLS(t *testing.T) {
	uri, files := testservers.NewMongoTLS(t)
	u, err := url.Parse(uri)
	require.NoError(t, err)
	u.Path = "/" + uniq("tls")
	roundTrip(t, u.String())

	q := u.Query()
	q.Set("tlsCAFile", testservers.NewTLSFiles(t).CA)
	q.Set("serverSelectionTimeoutMS", "2000")
	u.RawQuery = q.Encode()
	// The driver connects lazily: the first operation meets the certificate.
	began := time.Now()
	st, err := adapters.Open(context.Background(), u.String())
	if err == nil {
		var s session.Session
		if s, err = st.Session("x"); err == nil {
			_, err = s.Items(context.Background())
		}
		_ = st.Close()
	}
	require.Error(t, err)
	t.Logf("a certificate from another CA refused in %v: %v", time.Since(began), err)
	require.Contains(t, err.Error(), "certificate", "%v", err)

	q.Set("tlsInsecure", "true")
	u.RawQuery = q.Encode()
	roundTrip(t, u.String())
	require.FileExists(t, files.CA)
}
