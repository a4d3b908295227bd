package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// TestFerretDBInProcess runs FerretDB (SQLite handler) in this process and
// talks to it with the official MongoDB driver.
func TestFerretDBInProcess(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	srv, err := startFerretDB(ctx, "127.0.0.1:0", tlsFiles{}, t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("start ferretdb: %v", err)
	}
	defer func() {
		cancel()
		if err := srv.Wait(); err != nil {
			t.Errorf("ferretdb stopped with: %v", err)
		}
	}()

	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatalf("connect %s: %v", srv.URI, err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()

	opCtx, opCancel := context.WithTimeout(ctx, 30*time.Second)
	defer opCancel()
	if err := client.Ping(opCtx, readpref.Primary()); err != nil {
		t.Fatalf("ping %s: %v", srv.URI, err)
	}

	coll := client.Database("launcher_test").Collection("items")
	if _, err := coll.InsertOne(opCtx, bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 1}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	var got struct {
		N int `bson:"n"`
	}
	if err := coll.FindOne(opCtx, bson.D{{Key: "_id", Value: "a"}}).Decode(&got); err != nil {
		t.Fatalf("find: %v", err)
	}
	if got.N != 1 {
		t.Fatalf("find returned n=%d, want 1", got.N)
	}
}

// TestContainers starts the Redis and Mongo containers when a Docker engine
// answers; it is skipped otherwise.
func TestContainers(t *testing.T) {
	pingCtx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := dockerHealth(pingCtx); err != nil {
		t.Skipf("no Docker engine: %v", err)
	}
	for _, kind := range []string{"redis", "mongo"} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			ctr, uri, err := startContainer(ctx, kind)
			defer func() {
				if ctr != nil {
					_ = ctr.Terminate(context.Background())
				}
			}()
			if err != nil {
				t.Fatalf("start %s container: %v", kind, err)
			}
			if kind == "mongo" {
				if err := pingMongo(ctx, uri, time.Minute); err != nil {
					t.Fatalf("ping %s: %v", uri, err)
				}
			}
			t.Logf("%s container at %s", kind, uri)
		})
	}
}

func TestDirectConnection(t *testing.T) {
	got, err := directConnection("mongodb://localhost:32768/?replicaSet=rs0")
	if err != nil {
		t.Fatal(err)
	}
	want := "mongodb://localhost:32768/?directConnection=true&replicaSet=rs0"
	if got != want {
		t.Fatalf("directConnection = %q, want %q", got, want)
	}
}
