package golden

import "testing"

func TestDiff(t *testing.T) {
	tests := []struct {
		name, want, got, diff string
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{
			name: "one line changed in the middle",
			want: "1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			got:  "1\n2\n3\n4\nfive\n6\n7\n8\n9\n",
			diff: "@@ want line 2 @@\n  2\n  3\n  4\n- 5\n+ five\n  6\n  7\n  8\n",
		},
		{
			name: "a line added and one removed",
			want: "a\nb\nc\n",
			got:  "a\nc\nd\n",
			diff: "@@ want line 1 @@\n  a\n- b\n  c\n+ d\n  \n",
		},
	}
	for _, tt := range tests {
		if got := Diff([]byte(tt.want), []byte(tt.got)); got != tt.diff {
			t.Errorf("%s: Diff =\n%s\nwant\n%s", tt.name, got, tt.diff)
		}
	}
}
