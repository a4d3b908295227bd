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
	dir := fs.String("dir", "", "directory for the SQLite databases (created if missing); with -postgresql-url, unused")
	pgURL := fs.String("postgresql-url", "", "use FerretDB's PostgreSQL backend on this database URL instead of SQLite; the database is created if missing")
	watchStdin := fs.Bool("stdin", true, "stop when standard input is closed")
	serialize := fs.Bool("serialize-writes", false, "listen through a proxy that runs the write commands of each collection one at a time (atomic single-document updates); not with -tls-listen")
	var t tlsFiles
	fs.StringVar(&t.listen, "tls-listen", "", "TLS address to listen on instead of -listen (port 0 picks a free port)")
	fs.StringVar(&t.cert, "tls-cert", "", "server certificate (PEM), with -tls-listen")
	fs.StringVar(&t.key, "tls-key", "", "server key (PEM), with -tls-listen")
	fs.StringVar(&t.ca, "tls-ca", "", "CA certificate (PEM) clients verify the server with, with -tls-listen")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" && *pgURL == "" {
		return errors.New("-dir or -postgresql-url is required")
	}

	if *serialize && t.listen != "" {
		return errors.New("-serialize-writes does not support -tls-listen")
	}

	ctx, cancel := untilDone(*watchStdin)
	defer cancel()

	public := *listen
	if *serialize {
		*listen = "127.0.0.1:0" // FerretDB itself; the proxy takes the public address
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	var srv *ferretServer
	var err error
	if *pgURL != "" {
		srv, err = startFerretDBPostgres(ctx, *listen, t, *pgURL, logger)
	} else {
		srv, err = startFerretDB(ctx, *listen, t, *dir, logger)
	}
	if err != nil {
		return err
	}
	if *serialize {
		u, err := url.Parse(srv.URI)
		if err != nil {
			return err
		}
		p, err := newWriteSerializer(public, u.Host)
		if err != nil {
			return err
		}
		go p.serve(ctx)
		u.Host = p.Addr()
		srv.URI = u.String()
		if err := pingMongo(ctx, srv.URI, 30*time.Second); err != nil {
			return fmt.Errorf("ferretdb behind the write serializer at %s does not answer: %w", srv.URI, err)
		}
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

	return runFerretDBConfig(ctx, t, &ferretdb.Config{
		Listener:  listenerConfig(listen, t),
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: sqliteURL,
	})
}

// startFerretDBPostgres starts FerretDB with the PostgreSQL handler on
// listen, storing its databases as schemas of the PostgreSQL database
// pgURL names (created first if missing), and returns once a MongoDB
// driver can ping it. The server runs until ctx is canceled.
func startFerretDBPostgres(ctx context.Context, listen string, t tlsFiles, pgURL string, logger *slog.Logger) (*ferretServer, error) {
	if err := createDatabase(ctx, pgURL); err != nil {
		return nil, err
	}
	return runFerretDBConfig(ctx, t, &ferretdb.Config{
		Listener:      listenerConfig(listen, t),
		Logger:        logger,
		Handler:       "postgresql",
		PostgreSQLURL: pgURL,
	})
}

// listenerConfig is FerretDB's listener on listen, or on t.listen with TLS.
func listenerConfig(listen string, t tlsFiles) ferretdb.ListenerConfig {
	if t.listen != "" {
		// FerretDB's TLSCAFile asks clients for certificates; the CA here is
		// only what clients verify the server with.
		return ferretdb.ListenerConfig{TLS: t.listen, TLSCertFile: t.cert, TLSKeyFile: t.key}
	}
	return ferretdb.ListenerConfig{TCP: listen}
}

// runFerretDBConfig starts FerretDB with cfg and waits until a MongoDB
// driver can ping it.
func runFerretDBConfig(ctx context.Context, t tlsFiles, cfg *ferretdb.Config) (*ferretServer, error) {
	f, err := ferretdb.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("ferretdb.New (%s): %w", cfg.Handler, err)
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
