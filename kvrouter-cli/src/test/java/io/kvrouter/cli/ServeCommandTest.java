package io.kvrouter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code kvrouter serve} as a process: prints its configuration (token masked) and how to register
 * a worker, serves, and stops gracefully on SIGTERM; config-file and flag errors exit with 2.
 */
class ServeCommandTest {
  private static final Pattern LISTENING = Pattern.compile("listening on (http://\\S+)");

  @TempDir Path dir;

  @Test
  void servesAndStopsGracefullyOnSigterm() throws Exception {
    Path cfg = dir.resolve("serve.properties");
    Files.writeString(
        cfg,
        "port = 0\nauth-token = topsecret\nmax-body-size = 1MiB\naccept-unregistered = false\n"
            + "read-timeout-ms = 4500\n");
    Process p =
        new ProcessBuilder(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp",
                System.getProperty("java.class.path"),
                Main.class.getName(),
                "serve",
                "--config",
                cfg.toString(),
                "--accept-unregistered")
            .redirectErrorStream(true)
            .start();
    List<String> lines = new ArrayList<>();
    try {
      BufferedReader r =
          new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
      String url = null;
      for (String line; url == null && (line = r.readLine()) != null; ) {
        lines.add(line);
        Matcher m = LISTENING.matcher(line);
        if (m.find()) url = m.group(1);
      }
      assertThat(url).as(String.join("\n", lines)).startsWith("http://127.0.0.1:");
      HttpClient client = HttpClient.newHttpClient();
      HttpResponse<String> health =
          client.send(
              HttpRequest.newBuilder(URI.create(url + "/health")).build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(health.statusCode()).isEqualTo(200);
      HttpResponse<String> unauthorised =
          client.send(
              HttpRequest.newBuilder(URI.create(url + "/register"))
                  .POST(HttpRequest.BodyPublishers.ofString("{}"))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(unauthorised.statusCode()).isEqualTo(401);

      p.toHandle().destroy(); // SIGTERM (Process.destroy would also close our end of stdout)
      assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
      for (String line; (line = r.readLine()) != null; ) lines.add(line);
    } finally {
      p.destroyForcibly();
    }
    String out = String.join("\n", lines);
    assertThat(out)
        .contains("kvrouter serve: configuration")
        .containsPattern("auth-token +\\*{6} \\(set\\)")
        .containsPattern("max-body-size +1048576")
        .containsPattern("accept-unregistered +true")
        .containsPattern("read-timeout-ms +4500")
        .containsPattern("host +127\\.0\\.0\\.1")
        .contains("/register")
        .contains("kvrouter serve: stopped")
        .doesNotContain("topsecret");
  }

  @Test
  void badConfigurationIsAUsageError() throws IOException {
    Path unknown = dir.resolve("bad.properties");
    Files.writeString(unknown, "prot=1\n");
    Path badValue = dir.resolve("bad-value.properties");
    Files.writeString(badValue, "port=eighty\n");
    PrintStream oldErr = System.err;
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
    try {
      assertThat(Main.run("serve", "--config", unknown.toString())).isEqualTo(2);
      assertThat(Main.run("serve", "--config", badValue.toString())).isEqualTo(2);
      assertThat(Main.run("serve", "--config", dir.resolve("missing").toString())).isEqualTo(2);
      assertThat(Main.run("serve", "--port", "70000")).isEqualTo(2);
      assertThat(Main.run("serve", "--max-body-size", "lots")).isEqualTo(2);
      assertThat(Main.run("serve", "--max-blocks", "0")).isEqualTo(2);
      assertThat(Main.run("serve", "--read-timeout-ms", "0")).isEqualTo(2);
    } finally {
      System.setErr(oldErr);
    }
    assertThat(err.toString(StandardCharsets.UTF_8))
        .contains("unknown key 'prot'")
        .contains("eighty")
        .contains("cannot read --config")
        .contains("port must be in 0..65535")
        .contains("not a size: 'lots'")
        .contains("kvrouter serve: --max-blocks must be >= 1, got 0")
        .contains("kvrouter serve: --read-timeout-ms must be >= 1, got 0");
  }

  @Test
  void anUnreachablePeerExitsWithOneAndSaysWhy() throws IOException {
    int nobody;
    try (java.net.ServerSocket s = new java.net.ServerSocket(0)) {
      nobody = s.getLocalPort();
    }
    PrintStream oldErr = System.err;
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
    try {
      assertThat(Main.run("serve", "--port", "0", "--peer", "http://127.0.0.1:" + nobody))
          .isEqualTo(1);
      assertThat(Main.run("serve", "--port", "0", "--peer", "127.0.0.1:" + nobody)).isEqualTo(2);
    } finally {
      System.setErr(oldErr);
    }
    assertThat(err.toString(StandardCharsets.UTF_8))
        .contains(
            "kvrouter serve: warm start: cannot reach the peer http://127.0.0.1:"
                + nobody
                + " (GET /dump): ConnectException; is a kvrouter serve listening there?")
        .contains("is not an http://host:port URL of a running kvrouter serve");
  }

  @Test
  void sizesTakeBinaryUnits() {
    ServeCommand.SizeConverter c = new ServeCommand.SizeConverter();
    assertThat(c.convert("8MiB")).isEqualTo(8L << 20);
    assertThat(c.convert("512 KiB")).isEqualTo(512L << 10);
    assertThat(c.convert("1GiB")).isEqualTo(1L << 30);
    assertThat(c.convert("100")).isEqualTo(100L);
    assertThat(c.convert("100B")).isEqualTo(100L);
  }
}
