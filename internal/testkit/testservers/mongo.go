package testservers

import (
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
// answers; else FerretDB v1.24.2 with its SQLite backend on a free loopback
// port (run by the launcher, built on first use). Tests sharing it should
// each use their own database. FerretDB has no transactions and no TTL
// indexes. When no server can be had, the test is skipped, or fails when
// SESSIONS_REQUIRE_BACKENDS=1.
func Mongo(tb testing.TB) string {
	tb.Helper()
	uri, err := sharedMongo.get(startSharedMongo)
	if err != nil {
		unavailable(tb, "a Mongo-wire server", err)
	}
	return uri
}

// MongoKind reports which kind of server [Mongo] returned: "env",
// "container" or "ferretdb-sqlite"; "" before Mongo was first called or when
// it failed.
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
	uri, err := startFerretDB()
	if err != nil {
		tried.add("FerretDB (SQLite) via the launcher", err)
		return "", "", tried
	}
	return uri, KindFerretDBSQLite, nil
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
