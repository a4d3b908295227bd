package main

import (
	"encoding/binary"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// opMsgOf frames cmd as an OP_MSG with one body section.
func opMsgOf(t *testing.T, cmd bson.D) []byte {
	t.Helper()
	body, err := bson.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 16, 16+5+len(body))
	binary.LittleEndian.PutUint32(msg[12:], opMsg)
	msg = binary.LittleEndian.AppendUint32(msg, 0)
	msg = append(msg, 0)
	msg = append(msg, body...)
	binary.LittleEndian.PutUint32(msg, uint32(len(msg)))
	return msg
}

func TestWriteNamespace(t *testing.T) {
	for _, tc := range []struct {
		cmd   bson.D
		ns    string
		write bool
	}{
		{bson.D{{Key: "findAndModify", Value: "sessions"}, {Key: "query", Value: bson.D{{Key: "x", Value: bson.A{1, "a"}}}}, {Key: "$db", Value: "agents"}}, "agents.sessions", true},
		{bson.D{{Key: "update", Value: "c"}, {Key: "ordered", Value: true}, {Key: "$db", Value: "d"}}, "d.c", true},
		{bson.D{{Key: "insert", Value: "m"}, {Key: "lsid", Value: bson.D{{Key: "id", Value: bson.Binary{Subtype: 4, Data: make([]byte, 16)}}}}, {Key: "$db", Value: "d"}}, "d.m", true},
		{bson.D{{Key: "find", Value: "m"}, {Key: "$db", Value: "d"}}, "", false},
		{bson.D{{Key: "hello", Value: int32(1)}, {Key: "$db", Value: "admin"}}, "", false},
	} {
		ns, write := writeNamespace(opMsgOf(t, tc.cmd))
		if ns != tc.ns || write != tc.write {
			t.Errorf("writeNamespace(%v) = %q, %v; want %q, %v", tc.cmd, ns, write, tc.ns, tc.write)
		}
	}
}
