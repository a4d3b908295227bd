package testservers

import (
	"fmt"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"
)

// Time allowed for FerretDB to answer once the launcher is built, and to
// exit when asked.
const (
	ferretReadyTimeout = 60 * time.Second
	ferretStopGrace    = 10 * time.Second
)

var sharedMongo lazy[string]

// Mongo returns a MongoDB URI for a Mongo-wire server shared by the test
// process: SESSIONS_MONGO_URI when set; else a testcontainers-go mongo:8
// container running as a single-node replica set when a Docker engine
// answers; else FerretDB v1.24.2 on a free loopback port (run by the
// launcher, built on first use) behind the launcher's write serializer,
// with its SQLite backend, or with its PostgreSQL backend (a database of
// its own on the server [Postgres] returns) when SESSIONS_FERRETDB_BACKEND
// is "postgresql". Tests sharing it should each use their own database.
//
// FerretDB v1 is not atomic per document on either backend by itself (it
// reads a document, applies the update in Go and writes it back in two
// statements): the serializer runs the write commands of each collection
// one at a time, which makes every single-document update atomic, as on
// MongoDB. FerretDB has no transactions and no TTL indexes, and its
// PostgreSQL backend cannot store a string holding NUL (PostgreSQL's jsonb
// refuses \u0000) nor an id past its index row limit: the Mongo adapter
// reports those as session.ErrInvalidSessionID (adapters/mongo/ids.go),
// and SQLite, which stores them, is the default. When no server can be had, the test is skipped,
// or fails when SESSIONS_REQUIRE_BACKENDS=1.
func Mongo(tb testing.TB) string {
	tb.Helper()
	uri, err := sharedMongo.get(startSharedMongo)
	if err != nil {
		unavailable(tb, "a Mongo-wire server", err)
	}
	return uri
}

// MongoKind reports which kind of server [Mongo] returned: "env",
// "container", "ferretdb-sqlite" or "ferretdb-postgresql" (both behind the
// write serializer, so atomic per document); "" before Mongo was first
// called or when it failed.
func MongoKind() string { return sharedMongo.Kind() }

func startSharedMongo() (string, string, error) {
	if uri := os.Getenv(EnvMongoURI); uri != "" {
		return uri, KindEnv, nil
	}
	var tried attempts
	if err := dockerEngine(); err != nil {
		tried.add("testcontainers", err)
	} else {
		uri, err := startContainer("mongo")
		if err == nil {
			return uri, KindContainer, nil
		}
		tried.add("testcontainers mongo:8", err)
		note("a Docker engine answers but testcontainers mongo:8 failed, falling back to a local server: %v", err)
	}
	if os.Getenv(EnvFerretDBBackend) == "postgresql" {
		uri, err := sharedFerretPostgres.get(startSharedFerretPostgres)
		if err != nil {
			tried.add("FerretDB (PostgreSQL) via the launcher", err)
			return "", "", tried
		}
		return uri, KindFerretDBPostgres, nil
	}
	uri, err := startFerretDB()
	if err != nil {
		tried.add("FerretDB (SQLite) via the launcher", err)
		return "", "", tried
	}
	return uri, KindFerretDBSQLite, nil
}

// EnvFerretDBBackend, when "postgresql", makes [Mongo] run FerretDB on its
// PostgreSQL backend instead of SQLite.
const EnvFerretDBBackend = "SESSIONS_FERRETDB_BACKEND"

var sharedFerretPostgres lazy[string]

// FerretDBPostgres returns the URI of a FerretDB on its PostgreSQL backend
// behind the write serializer, shared by the test process (the one [Mongo]
// returns when SESSIONS_FERRETDB_BACKEND=postgresql): its data lives in a
// database of its own on the server [Postgres] returns. When it cannot be
// started, the test is skipped, or fails when SESSIONS_REQUIRE_BACKENDS=1.
func FerretDBPostgres(tb testing.TB) string {
	tb.Helper()
	uri, err := sharedFerretPostgres.get(startSharedFerretPostgres)
	if err != nil {
		unavailable(tb, "FerretDB on PostgreSQL", err)
	}
	return uri
}

func startSharedFerretPostgres() (string, string, error) {
	pg, _, err := func() (string, string, error) {
		u, err := sharedPostgres.get(startSharedPostgres)
		return u, "", err
	}()
	if err != nil {
		return "", "", fmt.Errorf("PostgreSQL: %w", err)
	}
	uri, err := startFerretDBPostgres(pg)
	return uri, KindFerretDBPostgres, err
}

// startFerretDBPostgres runs "launcher ferretdb" with the PostgreSQL
// backend, on a database of its own (created by the launcher) of the
// PostgreSQL server at pgURL.
func startFerretDBPostgres(pgURL string) (string, error) {
	u, err := ferretPostgresURL(pgURL, fmt.Sprintf("ferretdb_%d_%d", os.Getpid(), time.Now().UnixNano()))
	if err != nil {
		return "", err
	}
	return runLauncher("launcher ferretdb (postgresql)", ferretReadyTimeout, ferretStopGrace, syscall.SIGKILL,
		ferretPostgresArgs("127.0.0.1:0", u)...)
}

// ferretPostgresURL returns pgURL with its database replaced by db.
func ferretPostgresURL(pgURL, db string) (string, error) {
	u, err := url.Parse(pgURL)
	if err != nil {
		return "", fmt.Errorf("parse the PostgreSQL URL: %w", err)
	}
	u.Path = "/" + db
	return u.String(), nil
}

// startFerretDB runs "launcher ferretdb" with its data in a fresh directory,
// behind the write serializer.
// It listens on 127.0.0.1:0, so FerretDB itself binds a free port and
// reports it: no port race.
func startFerretDB() (string, error) {
	dir, err := subDir("ferretdb")
	if err != nil {
		return "", err
	}
	return runLauncher("launcher ferretdb", ferretReadyTimeout, ferretStopGrace, syscall.SIGKILL,
		append(ferretArgs("127.0.0.1:0", dir), "-serialize-writes")...)
}
