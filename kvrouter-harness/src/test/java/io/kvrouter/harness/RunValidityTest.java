package io.kvrouter.harness;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * A run is invalid for each way it measured the machine instead of the fleet, and only then; and
 * /proc/stat's line is read as the kernel documents it (proc(5)).
 */
class RunValidityTest {
  private static PolicyRun kept() {
    PolicyRun r = new PolicyRun();
    r.policy = "kv";
    r.sendLateMs = new double[] {0, 1, 2, 3, 5};
    r.tokenGaps = 1000;
    r.burstGaps = 20;
    r.replaysAbandoned = 0;
    r.eventsLost = 0;
    r.cpu = new CpuSample.Usage(0.7, 0.0);
    return r;
  }

  @Test
  void aRunThatKeptUpIsValid() {
    PolicyRun r = kept();
    RunValidity.judge(r);
    assertThat(r.invalid).isEmpty();
    // unknown figures (approx: no replays; not Linux: no CPU) do not invalidate
    PolicyRun unknown = kept();
    unknown.replaysAbandoned = -1;
    unknown.eventsLost = -1;
    unknown.cpu = null;
    unknown.tokenGaps = 0;
    unknown.burstGaps = 0;
    RunValidity.judge(unknown);
    assertThat(unknown.invalid).isEmpty();
  }

  @Test
  void eachWayOfFallingBehindIsAReason() {
    PolicyRun late = kept();
    late.sendLateMs = new double[100];
    for (int i = 90; i < 100; i++) late.sendLateMs[i] = 250; // the last tenth 250 ms late
    RunValidity.judge(late);
    assertThat(late.invalid).singleElement().asString().contains("p99 250 ms behind");

    PolicyRun bursts = kept();
    bursts.burstGaps = 300;
    RunValidity.judge(bursts);
    assertThat(bursts.invalid).singleElement().asString().contains("30 % of token gaps");

    PolicyRun lost = kept();
    lost.replaysAbandoned = 2;
    RunValidity.judge(lost);
    assertThat(lost.invalid).singleElement().asString().contains("2 replay(s) abandoned");

    PolicyRun stolen = kept();
    stolen.cpu = new CpuSample.Usage(0.9, 0.12);
    RunValidity.judge(stolen);
    assertThat(stolen.invalid).singleElement().asString().contains("12.0 % of the CPU time");

    PolicyRun all = kept();
    all.sendLateMs = new double[] {500};
    all.burstGaps = 999;
    all.eventsLost = 1;
    all.cpu = new CpuSample.Usage(1, 0.5);
    RunValidity.judge(all);
    assertThat(all.invalid).hasSize(4);
  }

  @Test
  void procStatIsReadByItsColumns() {
    // user nice system idle iowait irq softirq steal guest guest_nice
    CpuSample a = CpuSample.parse("cpu  100 0 50 800 50 0 0 0 0 0");
    CpuSample b = CpuSample.parse("cpu  400 0 150 900 50 0 0 100 7 0");
    assertThat(a).isEqualTo(new CpuSample(150, 850, 0));
    CpuSample.Usage u = CpuSample.between(a, b);
    // 400 busy, 100 idle, 100 steal ticks between them
    assertThat(u.busy()).isEqualTo(400.0 / 600);
    assertThat(u.steal()).isEqualTo(100.0 / 600);
    assertThat(CpuSample.parse("cpu0 1 2 3")).isNull();
    assertThat(CpuSample.between(null, b)).isNull();
    assertThat(CpuSample.between(a, a)).isNull();
  }
}
