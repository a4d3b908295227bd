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
// answers; else FerretDB v1.24.2 with its PostgreSQL backend on a free
// loopback port (run by the launcher, built on first use), storing its
// data in a database of its own on the server [Postgres] returns; else,
// when no PostgreSQL can be had, FerretDB with its SQLite backend. Tests
// sharing it should each use their own database. FerretDB has no
// transactions and no TTL indexes, and its single-document updates are
// not atomic on either backend by themselves (FerretDB v1 reads a
// document, applies the update in Go and writes it back, in two
// statements): the launcher therefore serialises the write commands of
// the PostgreSQL-backed server (see [MongoKind]). When no server can be
// had, the test is skipped, or fails when SESSIONS_REQUIRE_BACKENDS=1.
func Mongo(tb testing.TB) string {
	tb.Helper()
	uri, err := sharedMongo.get(startSharedMongo)
	if err != nil {
		unavailable(tb, "a Mongo-wire server", err)
	}
	return uri
}

// MongoKind reports which kind of server [Mongo] returned: "env",
// "container", "ferretdb-postgresql" (atomic single-document updates) or
// "ferretdb-sqlite" (not atomic: concurrent updates of one document lose
// updates); "" before Mongo was first called or when it failed.
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
	if pg, err := sharedPostgres.get(startSharedPostgres); err != nil {
		tried.add("FerretDB (PostgreSQL) via the launcher: PostgreSQL", err)
	} else if uri, err := startFerretDBPostgres(pg); err != nil {
		tried.add("FerretDB (PostgreSQL) via the launcher", err)
	} else {
		return uri, KindFerretDBPostgres, nil
	}
	note("no FerretDB on PostgreSQL (%v); falling back to FerretDB on SQLite, whose single-document updates are not atomic", tried)
	uri, err := startFerretDB()
	if err != nil {
		tried.add("FerretDB (SQLite) via the launcher", err)
		return "", "", tried
	}
	return uri, KindFerretDBSQLite, nil
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

// startFerretDB runs "launcher ferretdb" with its data in a fresh directory.
// It listens on 127.0.0.1:0, so FerretDB itself binds a free port and
// reports it: no port race.
func startFerretDB() (string, error) {
	dir, err := subDir("ferretdb")
	if err != nil {
		return "", err
	}
	return runLauncher("launcher ferretdb", ferretReadyTimeout, ferretStopGrace, syscall.SIGKILL,
		ferretArgs("127.0.0.1:0", dir)...)
}
