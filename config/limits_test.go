package config

import (
	"strings"
	"testing"
	"time"
)

func TestLimitsParse(t *testing.T) {
	cases := []struct {
		yaml    string
		want    Limits
		wantErr string
	}{
		{"agent: {limits: {processes: 64, memory: 512MiB, cpu_time: 90s, file_size: 100MB, output: 0, workspace_size: 5GiB, disk_reserve: 0}}",
			Limits{Processes: 64, Memory: 512 << 20, CPUTime: Duration(90 * time.Second), FileSize: 100e6, WorkspaceSize: 5 << 30}, ""},
		{"agent: {limits: {memory: 1.5G}}", func() Limits { l := DefaultLimits(); l.Memory = 1536 << 20; return l }(), ""},
		{"agent: {limits: {memory: lots}}", Limits{}, `"lots" is not a size`},
		{"agent: {limits: {memory: 2 parsecs}}", Limits{}, "is not a size"},
		{"agent: {limits: {memory: 1MiB}}", Limits{}, "agent.limits.memory: 1MiB is too little"},
		{"agent: {limits: {processes: -1}}", Limits{}, "agent.limits.processes: must not be negative"},
		{"agent: {limits: {processes: 3}}", Limits{}, "agent.limits.processes: 3 is too few"},
		{"agent: {limits: {cpu_time: 10ms}}", Limits{}, "agent.limits.cpu_time: 10ms is less than"},
		{"agent: {limits: {cpus: 2}}", Limits{}, "agent.limits.cpus"},
		{"agent: {limits: {disk_reserve: plenty}}", Limits{}, `"plenty" is not a size`},
	}
	for _, c := range cases {
		cfg, err := Parse(strings.NewReader(c.yaml), func(string) string { return "" })
		if err == nil {
			err = cfg.Validate()
		}
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: err %v, want %q", c.yaml, err, c.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.yaml, err)
			continue
		}
		if cfg.Agent.Limits != c.want {
			t.Errorf("%s: got %+v, want %+v", c.yaml, cfg.Agent.Limits, c.want)
		}
	}
	if d := Default().Agent.Limits; d.Processes != 1024 || d.Memory.String() != "2GiB" || d.FileSize.String() != "1GiB" ||
		d.WorkspaceSize.String() != "10GiB" || d.DiskReserve.String() != "1GiB" {
		t.Errorf("defaults %+v", d)
	}
}
