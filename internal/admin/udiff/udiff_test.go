// Copyright 2022 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found at https://go.dev/LICENSE.

package udiff

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The testdata are Go's own cases for this diff, in txtar form: the old
// text, the new text, and the expected diff.

func clean(text []byte) []byte {
	text = bytes.ReplaceAll(text, []byte("$\n"), []byte("\n"))
	text = bytes.TrimSuffix(text, []byte("^D\n"))
	return text
}

type file struct {
	name string
	data []byte
}

// parseTxtar is the small part of golang.org/x/tools/txtar the cases use:
// a comment, then files each introduced by a "-- name --" line.
func parseTxtar(data []byte) []file {
	var files []file
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		s := strings.TrimSuffix(string(line), "\n")
		if strings.HasPrefix(s, "-- ") && strings.HasSuffix(s, " --") && len(s) >= 6 {
			files = append(files, file{name: strings.TrimSpace(s[3 : len(s)-3])})
			continue
		}
		if len(files) > 0 {
			files[len(files)-1].data = append(files[len(files)-1].data, line...)
		}
	}
	return files
}

func TestGoCases(t *testing.T) {
	paths, _ := filepath.Glob("testdata/*.txt")
	if len(paths) == 0 {
		t.Fatalf("no testdata")
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			a := parseTxtar(data)
			if len(a) != 3 || a[2].name != "diff" {
				t.Fatalf("%s: want three files, third named \"diff\"", path)
			}
			diffs := Diff(a[0].name, clean(a[0].data), a[1].name, clean(a[1].data))
			want := clean(a[2].data)
			if !bytes.Equal(diffs, want) {
				t.Fatalf("%s: have:\n%s\nwant:\n%s\n%s", path, diffs, want, Diff("have", diffs, "want", want))
			}
		})
	}
}

// Identical texts have no diff at all.
func TestSame(t *testing.T) {
	if d := Diff("a", []byte("x\ny\n"), "b", []byte("x\ny\n")); d != nil {
		t.Fatalf("diff of identical texts: %q", d)
	}
}
