package io.kvrouter.server;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

/**
 * A minimal HTTP/1.1 client on one keep-alive socket (test support for the fuzz test, where the JDK
 * client's per-request cost would dominate): sends a request with a Content-Length, reads the
 * status, headers and body (fixed length or chunked), and reconnects when the server closed.
 */
final class RawHttp implements AutoCloseable {
  /** An answer. */
  record Answer(int status, String body) {}

  private final String host;
  private final int port;
  private Socket socket;
  private InputStream in;
  private OutputStream out;
  private int connections;

  RawHttp(String host, int port) {
    this.host = host;
    this.port = port;
  }

  Answer get(String path) throws IOException {
    return send("GET", path, null, null);
  }

  Answer post(String path, byte[] body) throws IOException {
    return send("POST", path, "application/json", body);
  }

  Answer send(String method, String path, String contentType, byte[] body) throws IOException {
    if (socket == null) connect();
    StringBuilder head = new StringBuilder(128);
    head.append(method).append(' ').append(path).append(" HTTP/1.1\r\nHost: ").append(host);
    head.append("\r\n");
    if (contentType != null) head.append("Content-Type: ").append(contentType).append("\r\n");
    if (body != null) head.append("Content-Length: ").append(body.length).append("\r\n");
    head.append("\r\n");
    try {
      out.write(head.toString().getBytes(StandardCharsets.US_ASCII));
      if (body != null) out.write(body);
      out.flush();
    } catch (IOException e) {
      // the server may close after answering early (a 413 before the body was read)
    }
    try {
      return read();
    } catch (IOException | RuntimeException e) {
      closeSocket();
      throw e;
    }
  }

  private Answer read() throws IOException {
    String status = line();
    if (status == null) throw new IOException("the server closed without answering");
    int code = Integer.parseInt(status.substring(9, 12));
    long length = -1;
    boolean chunked = false;
    boolean close = false;
    for (String h; !(h = line()).isEmpty(); ) {
      int colon = h.indexOf(':');
      String name = h.substring(0, colon).trim();
      String value = h.substring(colon + 1).trim();
      if (name.equalsIgnoreCase("Content-Length")) length = Long.parseLong(value);
      if (name.equalsIgnoreCase("Transfer-Encoding")) chunked = value.contains("chunked");
      if (name.equalsIgnoreCase("Connection")) close = value.equalsIgnoreCase("close");
    }
    ByteArrayOutputStream body = new ByteArrayOutputStream();
    if (chunked) {
      for (long n; (n = Long.parseLong(line().trim(), 16)) > 0; ) {
        body.write(in.readNBytes((int) n));
        line();
      }
      line();
    } else if (length >= 0) {
      body.write(in.readNBytes((int) length));
    } else {
      body.write(in.readAllBytes());
      close = true;
    }
    if (close) closeSocket();
    return new Answer(code, body.toString(StandardCharsets.UTF_8));
  }

  private String line() throws IOException {
    StringBuilder sb = new StringBuilder();
    int b;
    while ((b = in.read()) >= 0 && b != '\n') {
      if (b != '\r') sb.append((char) b);
    }
    if (b < 0 && sb.isEmpty()) return null;
    return sb.toString();
  }

  /** Connections opened so far (1 while the server keeps the first one alive). */
  int connections() {
    return connections;
  }

  private void connect() throws IOException {
    connections++;
    socket = new Socket(host, port);
    socket.setTcpNoDelay(true);
    socket.setSoTimeout(30_000);
    in = new BufferedInputStream(socket.getInputStream(), 16 << 10);
    out = socket.getOutputStream();
  }

  private void closeSocket() {
    try {
      if (socket != null) socket.close();
    } catch (IOException e) {
      // closing anyway
    }
    socket = null;
  }

  @Override
  public void close() {
    closeSocket();
  }
}
