package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.server.KvRouterServer;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/**
 * The edge flags declared once (EdgeOptions) keep each command's defaults and wording: serve's
 * texts from the annotations, the gateway's from its resource bundle.
 */
class EdgeOptionsTest {
  private static String help(Object command) {
    // one line: the usage message wraps long descriptions
    return new CommandLine(command)
        .getUsageMessage(CommandLine.Help.Ansi.OFF)
        .replaceAll("\\s+", " ");
  }

  @Test
  void eachCommandKeepsItsDefaultsAndWording() {
    String serve = help(new ServeCommand());
    assertThat(serve)
        .contains("TCP port, 0 for any free one (default: 8090).")
        .contains("loopback: only this machine can connect")
        .contains("Bearer token required on every mutating endpoint (default:")
        .contains("$KVROUTER_AUTH_TOKEN if set, else none).")
        .contains("how long requests in flight may take to finish (default:")
        .doesNotContain("Admin token");
    String gateway = help(new GatewayCommand());
    assertThat(gateway)
        .contains("TCP port, 0 for any free one (default: 8080).")
        .contains("Address to bind (default: 127.0.0.1).")
        .contains("Admin token of the router's mutating endpoints (/register ...;")
        .contains("how long streams in flight may take to finish (default: 30).")
        .doesNotContain("loopback: only this machine")
        .doesNotContain("Bearer token required");
  }

  @Test
  void theFlagsReachTheServersEdgeSettings() {
    ServeCommand serve = new ServeCommand();
    new CommandLine(serve)
        .parseArgs(
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--auth-token",
            "t",
            "--shutdown-grace-seconds",
            "3");
    KvRouterServer.Config c = serve.edge.applyTo(KvRouterServer.Config.builder()).build();
    assertThat(c.edge().host()).isEqualTo("0.0.0.0");
    assertThat(c.edge().port()).isZero();
    assertThat(c.edge().authToken()).isEqualTo("t");
    assertThat(c.edge().shutdownGrace()).isEqualTo(Duration.ofSeconds(3));

    GatewayCommand gateway = new GatewayCommand();
    new CommandLine(gateway).parseArgs("--model", "m");
    KvRouterServer.Config g = gateway.serverConfig();
    assertThat(g.edge().port()).isEqualTo(8080);
    assertThat(g.edge().shutdownGrace()).isEqualTo(Duration.ofSeconds(30));
  }

  @Test
  void bothCommandsTakeTheBodyLimitAsASize() {
    ServeCommand serve = new ServeCommand();
    new CommandLine(serve).parseArgs("--max-body-size", "2MiB");
    assertThat(serve.edge.applyTo(KvRouterServer.Config.builder()).build().edge().maxBodyBytes())
        .isEqualTo(2L << 20);

    GatewayCommand gateway = new GatewayCommand();
    new CommandLine(gateway).parseArgs("--model", "m", "--max-body-size", "512KiB");
    assertThat(gateway.serverConfig().edge().maxBodyBytes()).isEqualTo(512L << 10);

    GatewayCommand plain = new GatewayCommand();
    new CommandLine(plain).parseArgs("--model", "m", "--max-body-size", "1000");
    assertThat(plain.serverConfig().edge().maxBodyBytes()).isEqualTo(1000);

    GatewayCommand unset = new GatewayCommand();
    new CommandLine(unset).parseArgs("--model", "m");
    assertThat(unset.serverConfig().edge().maxBodyBytes()).isEqualTo(8L << 20);
  }
}
