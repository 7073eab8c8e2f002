// Copyright 2026 The protoc-gen-go-resilient Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"path/filepath"
	"testing"
)

// attack25gCompile writes files (path → source) to a temporary directory,
// generates Go for the ones named in gen (protoc-gen-go, -go-grpc and this
// plugin) and builds and vets it with the repository's runtime.
func attack25gCompile(t *testing.T, files map[string]string, gen ...string) map[string]string {
	t.Helper()
	goBin, repo := goAndRepo(t, "compiling generated code")
	src := t.TempDir()
	for name, text := range files {
		writeFile(t, filepath.Join(src, name), []byte(text))
	}
	req := compileRequest(t, "module="+testModule, []string{src, "../../options"}, gen...)
	out := t.TempDir()
	writeGoAndGRPC(t, goBin, repo, out, req)
	resp := runPlugin(t, req)
	if resp.Error != nil {
		t.Fatalf("plugin error:\n%s", resp.GetError())
	}
	written := map[string]string{}
	for _, f := range resp.File {
		writeFile(t, filepath.Join(out, filepath.FromSlash(f.GetName())), []byte(f.GetContent()))
		written[f.GetName()] = f.GetContent()
	}
	buildAndVet(t, goBin, out, repo, testModule, "")
	return written
}

// TestAttack25gKeyFieldNamesCompile: key fields whose names need
// escaping in Go (a leading underscore, a double underscore, a keyword,
// a digit after an underscore, two fields protoc-gen-go names alike,
// fields named in and ok), oneof members and proto3 optional fields, as
// idempotency keys and in cache keys, in a request of another Go package
// imported as keyPart, the name the cache key function gave the local
// holding the part of the oneof member key: that local hid the import,
// and its type switch on keyPart.Req_Key did not compile. The generated
// code compiles beside protoc-gen-go's and protoc-gen-go-grpc's.
func TestAttack25gKeyFieldNamesCompile(t *testing.T) {
	files := map[string]string{
		"kp/req.proto": `syntax = "proto3";
package attack25g.kp;
option go_package = "resilienttest/attack25g/keyPart;keyPart";
message Req {
  string _id = 1;
  string type = 2;
  int64 x__y = 3;
  oneof which { string key = 4; uint32 n_2 = 5; }
  optional bytes opt_b = 6;
  string x_id = 7;
  sint64 func = 8;
  optional int32 in = 9;
  optional string ok = 10;
}
`,
		"svc/svc.proto": `syntax = "proto3";
package attack25g.svc;
import "resilient/v1/resilient.proto";
import "kp/req.proto";
option go_package = "resilienttest/attack25g/svc;svc";
message Resp {}
service S {
  option (resilient.v1.service) = {timeout: {seconds: 1}, retry: {}};
  rpc A(attack25g.kp.Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "_id"}; }
  rpc B(attack25g.kp.Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "type"}; }
  rpc C(attack25g.kp.Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "x__y"}; }
  rpc D(attack25g.kp.Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "key"}; }
  rpc E(attack25g.kp.Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "n_2"}; }
  rpc F(attack25g.kp.Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "opt_b"}; }
  rpc G(attack25g.kp.Req) returns (Resp) { option (resilient.v1.method) = {idempotency_key: "func", server: {dedup: {ttl: {seconds: 5}}}}; }
  rpc H(attack25g.kp.Req) returns (Resp) {
    option (resilient.v1.method) = {idempotent: true, cache: {fresh_ttl: {seconds: 1}, key_fields: ["_id", "type", "x__y", "key", "n_2", "opt_b", "x_id", "func", "in", "ok"]}};
  }
  rpc I(attack25g.kp.Req) returns (Resp) {
    option (resilient.v1.method) = {idempotent: true, cache: {fresh_ttl: {seconds: 1}, key_fields: ["key"]}};
  }
}
`,
	}
	attack25gCompile(t, files, "kp/req.proto", "svc/svc.proto")
}
