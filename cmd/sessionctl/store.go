package main

import (
	"context"
	"fmt"

	"github.com/agentsessions/sessions/adapters"
	_ "github.com/agentsessions/sessions/adapters/all" // every backend's URL scheme
)

// openStore opens a store URL with a collector for corrupt-record reports.
func openStore(ctx context.Context, dsn string) (adapters.Store, *corruptReports, error) {
	corrupt := &corruptReports{}
	st, err := adapters.OpenWith(ctx, dsn, adapters.Options{OnCorrupt: corrupt.Handler()})
	if err != nil {
		return nil, nil, err
	}
	return st, corrupt, nil
}

// sessionIDs returns ids when given, and otherwise every session of st.
func sessionIDs(ctx context.Context, st adapters.Store, ids []string, dsn string) ([]string, error) {
	if len(ids) > 0 {
		return ids, nil
	}
	l, ok := st.(adapters.Lister)
	if !ok {
		return nil, fmt.Errorf("%s cannot list its sessions: name them with --session", redactDSN(dsn))
	}
	return l.ListSessions(ctx)
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return fmt.Sprint(*m) }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
