package testservers

import (
	"net"
	"net/http"
	"path/filepath"
	"testing"
)

func TestPingDocker(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("no unix sockets here: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/_ping" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("OK"))
	})}
	go srv.Serve(l)
	defer srv.Close()

	if err := pingDocker("unix://" + sock); err != nil {
		t.Fatalf("pingDocker(fake engine) = %v, want nil", err)
	}
	if err := pingDocker("unix://" + filepath.Join(t.TempDir(), "absent.sock")); err == nil {
		t.Fatal("pingDocker(absent socket) = nil, want an error")
	}
	if err := pingDocker("npipe:////./pipe/docker_engine"); err == nil {
		t.Fatal("pingDocker(npipe) = nil, want an error")
	}
}
