package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcmongo "github.com/testcontainers/testcontainers-go/modules/mongodb"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Images started by "launcher container".
const (
	redisImage    = "redis:7"
	mongoImage    = "mongo:8"
	postgresImage = "postgres:17"
)

// runContainer implements "launcher container redis|mongo|postgres".
func runContainer(args []string) error {
	if len(args) == 0 {
		return errors.New("want redis, mongo or postgres")
	}
	kind := args[0]
	fs := newFlagSet("container " + kind)
	watchStdin := fs.Bool("stdin", true, "stop when standard input is closed")
	startTimeout := fs.Duration("timeout", 5*time.Minute, "time allowed to pull and start the container")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}

	ctx, cancel := untilDone(*watchStdin)
	defer cancel()

	startCtx, cancelStart := context.WithTimeout(ctx, *startTimeout)
	ctr, uri, err := startContainer(startCtx, kind)
	cancelStart()
	// Terminate even on error: a container may have been created.
	defer func() {
		if terr := testcontainers.TerminateContainer(ctr); terr != nil {
			fmt.Fprintf(errOut, "terminate %s container: %v\n", kind, terr)
		}
	}()
	if err != nil {
		return err
	}
	ready(uri)
	<-ctx.Done()
	return nil
}

// startContainer starts a container of the given kind and returns it with
// the URL clients use to reach it.
func startContainer(ctx context.Context, kind string) (testcontainers.Container, string, error) {
	switch kind {
	case "redis":
		c, err := tcredis.Run(ctx, redisImage)
		if c == nil {
			return nil, "", fmt.Errorf("start %s: %w", redisImage, err)
		}
		if err != nil {
			return c, "", fmt.Errorf("start %s: %w", redisImage, err)
		}
		uri, err := c.ConnectionString(ctx)
		if err != nil {
			return c, "", err
		}
		return c, strings.TrimSuffix(uri, "/") + "/0", nil
	case "mongo":
		c, err := tcmongo.Run(ctx, mongoImage, tcmongo.WithReplicaSet("rs0"))
		if c == nil {
			return nil, "", fmt.Errorf("start %s: %w", mongoImage, err)
		}
		if err != nil {
			return c, "", fmt.Errorf("start %s: %w", mongoImage, err)
		}
		uri, err := c.ConnectionString(ctx)
		if err != nil {
			return c, "", err
		}
		uri, err = directConnection(uri)
		return c, uri, err
	case "postgres":
		return startPostgres(ctx)
	default:
		return nil, "", fmt.Errorf("unknown container kind %q (want redis, mongo or postgres)", kind)
	}
}

// directConnection adds directConnection=true to a MongoDB URI. The replica
// set's only member is registered under the container's bridge IP, which the
// host may not reach (Docker Desktop); a direct connection to the mapped port
// still talks to the primary, so transactions keep working.
func directConnection(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("directConnection", "true")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// startPostgres starts postgres:17 as a generic container (the image's own
// entrypoint makes the cluster; no module needed): superuser postgres,
// password postgres, database postgres. The image logs "ready to accept
// connections" twice, once for its init server and once for the real one.
func startPostgres(ctx context.Context) (testcontainers.Container, string, error) {
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        postgresImage,
			ExposedPorts: []string{"5432/tcp"},
			Env:          map[string]string{"POSTGRES_PASSWORD": "postgres"},
			Cmd:          []string{"postgres", "-c", "fsync=off", "-c", "max_connections=200"},
			WaitingFor: wait.ForAll(
				wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
				wait.ForListeningPort("5432/tcp"),
			),
		},
		Started: true,
	})
	if c == nil {
		return nil, "", fmt.Errorf("start %s: %w", postgresImage, err)
	}
	if err != nil {
		return c, "", fmt.Errorf("start %s: %w", postgresImage, err)
	}
	host, err := c.Host(ctx)
	if err != nil {
		return c, "", err
	}
	port, err := c.MappedPort(ctx, "5432/tcp")
	if err != nil {
		return c, "", err
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword("postgres", "postgres"),
		Host: net.JoinHostPort(host, port.Port()), Path: "/postgres", RawQuery: "sslmode=disable"}
	return c, u.String(), nil
}
