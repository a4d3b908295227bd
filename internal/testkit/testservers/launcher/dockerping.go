package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/testcontainers/testcontainers-go"
)

// errOut is where diagnostics go; stdout is reserved for the READY line.
var errOut = os.Stderr

// runDockerPing implements "launcher docker-ping": it exits 0 if and only if
// a Docker engine answers testcontainers' provider health check.
func runDockerPing(args []string) error {
	fs := newFlagSet("docker-ping")
	timeout := fs.Duration("timeout", 3*time.Second, "time allowed for the engine to answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	return dockerHealth(ctx)
}

// dockerHealth reports whether a Docker engine answers.
func dockerHealth(ctx context.Context) (err error) {
	// The provider may panic when no engine configuration can be found.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("docker provider: %v", r)
		}
	}()
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return fmt.Errorf("docker provider: %w", err)
	}
	// Health closes the provider.
	if err := p.Health(ctx); err != nil {
		return fmt.Errorf("docker engine does not answer: %w", err)
	}
	return nil
}
