package testservers

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TLSFiles are the PEM files of a throwaway certificate authority and of a
// server certificate it signed for 127.0.0.1 and localhost, made at test
// time in a temporary directory.
type TLSFiles struct {
	CA   string // the CA certificate
	Cert string // the server certificate
	Key  string // the server key
}

// NewTLSFiles makes a fresh CA and a server certificate signed by it.
func NewTLSFiles(tb testing.TB) TLSFiles {
	tb.Helper()
	dir := tb.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "agentsessions test CA " + strconv.FormatInt(now.UnixNano(), 36)},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		tb.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	f := TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server.key")}
	for path, block := range map[string]*pem.Block{
		f.CA:   {Type: "CERTIFICATE", Bytes: caDER},
		f.Cert: {Type: "CERTIFICATE", Bytes: der},
		f.Key:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return f
}

// RedisTLSServer is a private redis-server that also listens with TLS.
type RedisTLSServer struct {
	*RedisServer
	TLS     TLSFiles
	tlsPort int
}

// TLSURL returns the server's TLS URL, rediss://127.0.0.1:PORT/0.
func (s *RedisTLSServer) TLSURL() string {
	return "rediss://127.0.0.1:" + strconv.Itoa(s.tlsPort) + "/0"
}

// NewRedisTLSServer starts a private redis-server with a TLS port using a
// certificate from a fresh throwaway CA (clients are not asked for
// certificates); its plain port stays open for readiness checks. It is
// skipped, or fails with SESSIONS_REQUIRE_BACKENDS=1, when redis-server
// cannot be started with TLS.
func NewRedisTLSServer(tb testing.TB) *RedisTLSServer {
	tb.Helper()
	files := NewTLSFiles(tb)
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	s := &RedisServer{
		tb:  tb,
		dir: tb.TempDir(),
		extraArgs: []string{"--save", "", "--appendonly", "no",
			"--tls-port", strconv.Itoa(port), "--tls-cert-file", files.Cert, "--tls-key-file", files.Key,
			"--tls-ca-cert-file", files.CA, "--tls-auth-clients", "no"},
		private: private{grace: redisStopGrace},
	}
	if err := s.startNewPort(); err != nil {
		unavailable(tb, "a local redis-server with TLS (Debian's redis-server is built with TLS)", err)
	}
	tb.Cleanup(func() { s.stop(false) })
	return &RedisTLSServer{RedisServer: s, TLS: files, tlsPort: port}
}

// NewMongoTLS starts a private FerretDB that listens only with TLS, with a
// certificate from a fresh throwaway CA, and returns it with its URI
// (mongodb://127.0.0.1:PORT/?tls=true&tlsCAFile=CA). It is stopped when the
// test process ends, and skipped (or failed with
// SESSIONS_REQUIRE_BACKENDS=1) when it cannot be started.
func NewMongoTLS(tb testing.TB) (uri string, files TLSFiles) {
	tb.Helper()
	files = NewTLSFiles(tb)
	dir, err := subDir("ferretdb-tls")
	if err == nil {
		uri, err = runLauncher("launcher ferretdb (TLS)", ferretReadyTimeout, ferretStopGrace, syscall.SIGKILL,
			"ferretdb", "-dir", dir, "-tls-listen", "127.0.0.1:0",
			"-tls-cert", files.Cert, "-tls-key", files.Key, "-tls-ca", files.CA)
	}
	if err != nil {
		unavailable(tb, "FerretDB with TLS via the launcher", err)
	}
	return uri, files
}
