package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.gateway.SessionConfig;
import io.kvrouter.route.Scorers;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * The cost's scorers and the session flags as {@code serve} and {@code gateway} read them, from the
 * command line and from a {@code --config} file; each mistake exits 2 with a line that names the
 * key and what is wrong.
 */
class ScorerConfigTest {

  private static GatewayCommand fromFile(Path cfg, String... args) {
    GatewayCommand c = new GatewayCommand();
    CommandLine cl = new CommandLine(c);
    String[] all = new String[args.length + 2];
    all[0] = "--config";
    all[1] = cfg.toString();
    System.arraycopy(args, 0, all, 2, args.length);
    cl.parseArgs(all);
    return ConfigFileArgs.reparse(
        cl.getCommandSpec(),
        cfg,
        "kvrouter gateway",
        GatewayCommand.MULTI,
        GatewayCommand::new,
        new PrintWriter(new StringWriter()));
  }

  @Test
  void withoutScorersTheCostIsTheDefaultComposition() {
    GatewayCommand c = new GatewayCommand();
    new CommandLine(c).parseArgs("--model", "m", "--overlap-weight", "2", "--pressure-weight", "5");
    assertThat(c.scorers(c.sessionConfig())).isEqualTo(Scorers.defaults(2, 5));
  }

  @Test
  void aConfigFileSetsWeightsAndAddsTerms(@TempDir Path dir) throws Exception {
    Path cfg = dir.resolve("gw.properties");
    Files.writeString(
        cfg,
        "model=m\n"
            + "scorer=prefill=2 queue=0.5 pressure=0\n"
            + "session-mode=soft\n"
            + "session-key=user\n"
            + "session-ttl-seconds=600\n"
            + "session-max-keys=5000\n");
    GatewayCommand c = fromFile(cfg);
    SessionConfig s = c.sessionConfig();
    assertThat(s)
        .isEqualTo(
            new SessionConfig(
                SessionConfig.Mode.SOFT,
                SessionConfig.Source.USER,
                null,
                Duration.ofSeconds(600),
                5000));
    Scorers cost = c.scorers(s);
    assertThat(cost.names()).containsExactly("prefill", "decode", "pressure", "queue", "session");
    assertThat(cost.weight("prefill")).isEqualTo(2);
    assertThat(cost.weight("decode")).isEqualTo(1);
    assertThat(cost.weight("pressure")).isZero();
    assertThat(cost.weight("queue")).isEqualTo(0.5);
    // soft mode without a session weight: the default one
    assertThat(cost.weight("session")).isEqualTo(GatewayCommand.DEFAULT_SESSION_WEIGHT);
    assertThat(c.gatewayConfig().sessions()).isEqualTo(s);
    // the command line wins over the file
    GatewayCommand over = fromFile(cfg, "--session-mode", "hard");
    assertThat(over.sessionConfig().mode()).isEqualTo(SessionConfig.Mode.HARD);
    assertThat(over.scorers(over.sessionConfig()).weight("session")).isZero();
  }

  private static String exit2(Path dir, String config) throws Exception {
    Path cfg = dir.resolve("bad.properties");
    Files.writeString(cfg, config);
    StringWriter err = new StringWriter();
    int code = GatewayCommandTest.run(err, "--config", cfg.toString());
    assertThat(code).as(err.toString()).isEqualTo(2);
    return err.toString();
  }

  @Test
  void configFileMistakesAreClearUsageErrors(@TempDir Path dir) throws Exception {
    assertThat(exit2(dir, "model=m\nscorer=latency=1\n"))
        .contains(
            "--scorer latency=1: unknown scorer 'latency'; the scorers are prefill, decode,"
                + " pressure, queue, session");
    assertThat(exit2(dir, "model=m\nscorer=queue\n"))
        .contains("--scorer 'queue': expected NAME=WEIGHT, e.g. --scorer queue=0.5");
    assertThat(exit2(dir, "model=m\nscorer=queue=fast\n"))
        .contains("--scorer queue=fast: the weight is not a number");
    assertThat(exit2(dir, "model=m\nscorer=queue=-1\n"))
        .contains("--scorer queue=-1: weight of scorer queue must be finite and >= 0, got -1.0");
    assertThat(exit2(dir, "model=m\nscorer=queue=1 queue=2\n"))
        .contains("--scorer queue is given twice");
    assertThat(exit2(dir, "model=m\nscorers=queue=1\n"))
        .contains("unknown key 'scorers'; keys are the long flag names without dashes");
    assertThat(exit2(dir, "model=m\nsession-mode=sticky\n"))
        .contains("--session-mode 'sticky': expected off, soft or hard");
    assertThat(exit2(dir, "model=m\nsession-mode=hard\nsession-key=cookie\n"))
        .contains(
            "--session-key: session key source 'cookie': expected header:NAME (e.g."
                + " header:x-session-id), user or previous_response_id");
    assertThat(exit2(dir, "model=m\nsession-mode=hard\nsession-key=header:bad header\n"))
        .contains("session key header 'bad header' is not a valid HTTP header name");
    assertThat(exit2(dir, "model=m\nsession-max-keys=0\n"))
        .contains("--session-max-keys must be >= 1, got 0");
    assertThat(exit2(dir, "model=m\nsession-ttl-seconds=0\n"))
        .contains("--session-ttl-seconds must be >= 1, got 0");
  }

  @Test
  void serveTakesScorersFromItsConfigFileToo(@TempDir Path dir) throws Exception {
    Path cfg = dir.resolve("serve.properties");
    Files.writeString(cfg, "port=0\nscorer=bogus=1\n");
    StringWriter err = new StringWriter();
    int code =
        new CommandLine(new ServeCommand())
            .setErr(new PrintWriter(err, true))
            .setOut(new PrintWriter(new StringWriter(), true))
            .execute("--config", cfg.toString());
    assertThat(code).isEqualTo(2);
    assertThat(err.toString()).contains("kvrouter serve: --scorer bogus=1: unknown scorer 'bogus'");
  }
}
