package replay_test

import (
	"errors"
	"testing"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
)

// A bad sink setting is refused before the replay writes anything: no
// table, no branch.
func TestReplayBadSinkConfigWritesNothing(t *testing.T) {
	e := newEnv(t)
	const topic = "cfg"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 10, "a"))
	main := e.Table("lake.main")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		opts    replay.Options
		target  string
		setting connector.Setting
	}{
		{"on-data-loss, new table", replay.Options{Topic: topic, Sink: connector.Config{OnDataLoss: "bogus"}}, "lake.cfg", connector.SettingOnDataLoss},
		{"on-data-loss, branch", replay.Options{Topic: topic, Branch: "b", Sink: connector.Config{OnDataLoss: "bogus"}}, "lake.main", connector.SettingOnDataLoss},
		{"start, new table", replay.Options{Topic: topic, From: bound(t, "0=2", topic, true), Sink: connector.Config{Start: "bogus"}}, "lake.cfg", connector.SettingStart},
	} {
		_, err := e.replay(c.target, c.opts)
		var bad *connector.ConfigError
		if !errors.As(err, &bad) || bad.Setting != c.setting || bad.Value != "bogus" {
			t.Errorf("%s: error %v; want one naming %s bogus", c.name, err, c.setting)
		}
		if e.exists("lake.cfg") {
			t.Fatalf("%s: the refused replay created its table", c.name)
		}
		if e.openExisting("lake.main", "").HasBranch("b") {
			t.Fatalf("%s: the refused replay created its branch", c.name)
		}
	}
}

// TestOptionsValidate: options no replay can use are refused before any
// broker or catalog is asked, each naming the option.
func TestOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		opts    replay.Options
		setting string
	}{
		{replay.Options{}, string(replay.SettingTopic)},
		{replay.Options{Topic: "t", Fold: "sum"}, string(replay.SettingFold)},
		{replay.Options{Topic: "t", Fold: "latest", Mode: mapping.ModeUpsert}, string(replay.SettingFold)},
		{replay.Options{Topic: "t", Mode: mapping.ModeFold}, string(replay.SettingMode)},
		{replay.Options{Topic: "t", Key: &mapping.UpsertKey{Source: mapping.KeyFromKafkaKey}}, string(replay.SettingKey)},
		{replay.Options{Topic: "t", Branch: "b", Publish: false, PublishDifferent: true}, string(replay.SettingPublishDifferent)},
		{replay.Options{Topic: "t", Publish: true}, string(replay.SettingPublish)},
		{replay.Options{Topic: "t", Branch: "main"}, string(replay.SettingBranch)},
		{replay.Options{Topic: "t", Until: replay.Bound{Spec: "snapshot:1", Snapshot: 1}}, string(replay.SettingUntil)},
		{replay.Options{Topic: "t", Sink: connector.Config{OnDataLoss: "x"}}, string(connector.SettingOnDataLoss)},
	} {
		err := c.opts.Validate()
		var oe *replay.OptionError
		var be *replay.BoundError
		var ce *connector.ConfigError
		got := ""
		switch {
		case errors.As(err, &oe):
			got = string(oe.Setting)
		case errors.As(err, &be):
			got = string(be.Setting)
		case errors.As(err, &ce):
			got = string(ce.Setting)
		}
		if got != c.setting {
			t.Errorf("%+v: %v; want an error naming %s", c.opts, err, c.setting)
		}
	}
	if err := (replay.Options{Topic: "t", Branch: "rebuild", Publish: true, Fold: "latest"}).Validate(); err != nil {
		t.Errorf("valid options: %v", err)
	}
}
