package config

import "testing"

// Digest tells apart what loads apart: a path, a folder, contents, and
// whether a source bounds the file (one config saved for a rollout with
// and without its source's bound must not be taken for the other).
func TestDigestTellsApartWhatLoadsApart(t *testing.T) {
	base := File{Path: "a.yaml", Dir: "d", Data: []byte("services: []")}
	same := base
	if Digest([]File{base}) != Digest([]File{same}) {
		t.Fatal("one file digests two ways")
	}
	for name, f := range map[string]File{
		"path":    {Path: "b.yaml", Dir: "d", Data: base.Data},
		"folder":  {Path: "a.yaml", Dir: "e", Data: base.Data},
		"data":    {Path: "a.yaml", Dir: "d", Data: []byte("services: [ ]")},
		"bounded": {Path: "a.yaml", Dir: "d", Data: base.Data, SourceBounded: true},
		// Lengths are prefixed: moving bytes from path to folder shows.
		"split": {Path: "a.yam", Dir: "ld", Data: base.Data},
	} {
		if Digest([]File{f}) == Digest([]File{base}) {
			t.Errorf("a file differing by its %s digests as the first", name)
		}
	}
}
