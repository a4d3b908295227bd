package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// runFerretDB implements "launcher ferretdb".
func runFerretDB(args []string) error {
	fs := newFlagSet("ferretdb")
	listen := fs.String("listen", "127.0.0.1:0", "TCP address to listen on (port 0 picks a free port)")
	dir := fs.String("dir", "", "directory for the SQLite databases (created if missing)")
	watchStdin := fs.Bool("stdin", true, "stop when standard input is closed")
	var t tlsFiles
	fs.StringVar(&t.listen, "tls-listen", "", "TLS address to listen on instead of -listen (port 0 picks a free port)")
	fs.StringVar(&t.cert, "tls-cert", "", "server certificate (PEM), with -tls-listen")
	fs.StringVar(&t.key, "tls-key", "", "server key (PEM), with -tls-listen")
	fs.StringVar(&t.ca, "tls-ca", "", "CA certificate (PEM) clients verify the server with, with -tls-listen")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("-dir is required")
	}

	ctx, cancel := untilDone(*watchStdin)
	defer cancel()

	srv, err := startFerretDB(ctx, *listen, t, *dir, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil {
		return err
	}
	ready(srv.URI)
	return srv.Wait()
}

// tlsFiles configures a TLS listener; the zero value means plain TCP.
type tlsFiles struct{ listen, cert, key, ca string }

// ferretServer is a running embedded FerretDB.
type ferretServer struct {
	// URI is the MongoDB URI of the server, e.g. mongodb://127.0.0.1:PORT/.
	URI  string
	done chan error
}

// Wait blocks until the server has stopped (its context was canceled).
func (s *ferretServer) Wait() error { return <-s.done }

// startFerretDB starts FerretDB with the SQLite handler on listen, storing
// its databases under dir, and returns once a MongoDB driver can ping it.
// The server runs until ctx is canceled.
func startFerretDB(ctx context.Context, listen string, t tlsFiles, dir string, logger *slog.Logger) (*ferretServer, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, err
	}
	// FerretDB wants a "file:" URL of an existing directory, ending with "/".
	// Its transactions begin IMMEDIATE (an option FerretDB supports): a
	// deferred one that reads, then writes, fails at once with SQLITE_BUSY
	// when another writer holds the lock (SQLite does not wait there, to
	// avoid a deadlock), which concurrent writers on a loaded machine hit;
	// an immediate one waits for the lock through the busy timeout.
	sqliteURL := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs) + "/", RawQuery: "_txlock=immediate"}).String()

	lc := ferretdb.ListenerConfig{TCP: listen}
	if t.listen != "" {
		// FerretDB's TLSCAFile asks clients for certificates; the CA here is
		// only what clients verify the server with.
		lc = ferretdb.ListenerConfig{TLS: t.listen, TLSCertFile: t.cert, TLSKeyFile: t.key}
	}
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  lc,
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: sqliteURL,
	})
	if err != nil {
		return nil, fmt.Errorf("ferretdb.New (sqlite %s): %w", sqliteURL, err)
	}

	srv := &ferretServer{done: make(chan error, 1)}
	go func() { srv.done <- f.Run(ctx) }()

	// The listener is bound by New, so MongoDBURI does not block.
	srv.URI = f.MongoDBURI()
	if t.listen != "" {
		srv.URI += "&tlsCAFile=" + url.QueryEscape(t.ca)
	}
	if err := pingMongo(ctx, srv.URI, 30*time.Second); err != nil {
		return nil, fmt.Errorf("ferretdb at %s does not answer: %w", srv.URI, err)
	}
	return srv, nil
}

// pingMongo connects to uri and pings it, retrying until timeout.
func pingMongo(ctx context.Context, uri string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(timeout))
	if err != nil {
		return err
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	return client.Ping(ctx, readpref.Primary())
}
