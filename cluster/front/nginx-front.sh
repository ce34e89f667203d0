#!/usr/bin/env bash
# One endpoint for many MicroSpec pairs: writes an nginx configuration (Debian's
# nginx) with the pairs as one upstream group, checks it with `nginx -t`, and
# with --start runs nginx on it.
#
#   cluster/front/nginx-front.sh --pairs FILE [--port P] [--listen ADDR] [--out DIR]
#                                [--token T] [--upstream-token U] [--max-conns N] [--fail-timeout S] [--env NAME]...
#                                [--start|--foreground]
#   cluster/front/nginx-front.sh --stop [--out DIR]
#
# --pairs FILE: one pair URL a line (http://HOST:PORT; cluster/slurm/submit.sh
# --wait writes build/slurm/pairs.urls; `#` comments and blank lines skipped).
# What the front does:
#   least_conn      a request goes to the pair with the fewest open requests
#   passive health  a pair that refuses or drops a connection is out for 10 s
#                   (max_fails=1 fail_timeout=10s; --fail-timeout), then tried again
#   retries         a request that got no response byte yet (connection refused
#                   or reset, the pair died) goes to the next pair, POST included
#                   (proxy_next_upstream ... non_idempotent); a pair's own 503
#                   (its queue is full) is passed to the client, not retried
#   streaming       proxy_buffering off: server-sent events reach the client as
#                   the pair writes them
#   overload        beyond --max-conns (default 512) client connections the front
#                   answers 503 itself (limit_conn), never a reset
#   bearer token    by default the client's Authorization header goes to the pair
#                   as is; --token T makes the front check "Bearer T" itself (401
#                   otherwise) and --upstream-token U sends "Bearer U" to the pairs
# Only /v1/ is proxied (the pairs' /health and /metrics stay on their hosts);
# the front's own /health answers 200. Each response carries the pair that
# answered in X-MicroSpec-Pair. Defaults: --port 8000, --listen 127.0.0.1,
# --out ${MS_FRONT_DIR:-build/front} (nginx.conf, logs, pid, temp folders). --env NAME passes
# that variable to nginx's workers (nginx clears their environment otherwise).
set -euo pipefail
me="nginx-front.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
usage() { sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
envs=() pairs="" port=8000 listen=127.0.0.1 out=${MS_FRONT_DIR:-$root/build/front} token="" up_token="" max_conns=512 fail_timeout=10 action=""
while [ $# -gt 0 ]; do
  case "$1" in
    --pairs) pairs=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --listen) listen=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --token) token=$2; shift 2 ;;
    --upstream-token) up_token=$2; shift 2 ;;
    --max-conns) max_conns=$2; shift 2 ;;
    --fail-timeout) fail_timeout=$2; shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    --start|--foreground|--stop) action=${1#--}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "$me: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { echo "$me: nginx not found (tools/install-deps.sh installs it)" >&2; exit 2; }
nginx=$(command -v nginx || echo /usr/sbin/nginx)
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ "$action" = stop ]; then
  [ -s "$out/nginx.pid" ] || { echo "$me: no front running from $out" >&2; exit 0; }
  "$nginx" -p "$out" -c "$out/nginx.conf" -e "$out/error.log" -s quit
  exit 0
fi
[ -n "$pairs" ] || { usage >&2; exit 2; }
[ -r "$pairs" ] || { echo "$me: $pairs: cannot read it" >&2; exit 2; }
[[ "$port" =~ ^[0-9]+$ ]] || { echo "$me: --port takes a number" >&2; exit 2; }
[[ "$max_conns" =~ ^[1-9][0-9]*$ ]] || { echo "$me: --max-conns takes a positive number" >&2; exit 2; }
[[ "$fail_timeout" =~ ^[1-9][0-9]*$ ]] || { echo "$me: --fail-timeout takes a positive number of seconds" >&2; exit 2; }
for e in "${envs[@]}"; do
  [[ "$e" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || { echo "$me: --env takes a variable name" >&2; exit 2; }
done
for t in "$token" "$up_token"; do
  [[ "$t" =~ ^[A-Za-z0-9._~+/=-]*$ ]] || { echo "$me: a token may hold only [A-Za-z0-9._~+/=-]" >&2; exit 2; }
done

servers=()
while read -r line; do
  line=${line%%#*}
  line=${line//[[:space:]]/}
  [ -n "$line" ] || continue
  [[ "$line" =~ ^http://([^/]+:[0-9]+)/?$ ]] || { echo "$me: $pairs: '$line' is not http://HOST:PORT" >&2; exit 2; }
  servers+=("${BASH_REMATCH[1]}")
done <"$pairs"
[ ${#servers[@]} -gt 0 ] || { echo "$me: $pairs lists no pair" >&2; exit 2; }

mkdir -p "$out/temp"
{
  cat <<EOF
# written by cluster/front/nginx-front.sh from $pairs (${#servers[@]} pairs)
worker_processes 1;
pid $out/nginx.pid;
error_log $out/error.log warn;
events { worker_connections $((max_conns * 2 + 64)); }
EOF
  for e in "${envs[@]}"; do echo "env $e;"; done
  cat <<EOF
http {
  access_log $out/access.log;
  client_body_temp_path $out/temp/body;
  proxy_temp_path $out/temp/proxy;
  fastcgi_temp_path $out/temp/fastcgi;
  uwsgi_temp_path $out/temp/uwsgi;
  scgi_temp_path $out/temp/scgi;
  client_max_body_size 16m;
  # The body is kept until the response starts, so a retry can resend it.
  client_body_buffer_size 1m;
  limit_conn_zone \$server_name zone=front:1m;
  upstream microspec_pairs {
    least_conn;
EOF
  for s in "${servers[@]}"; do echo "    server $s max_fails=1 fail_timeout=${fail_timeout}s;"; done
  cat <<EOF
    keepalive 32;
  }
  server {
    listen $listen:$port;
    # The connection limit's key: requests with an empty key are not counted.
    server_name microspec_front;
    limit_conn front $max_conns;
    limit_conn_status 503;
    location = /health { default_type application/json; return 200 '{"status":"ok","pairs":${#servers[@]}}'; }
    location /v1/ {
EOF
  if [ -n "$token" ]; then
    echo "      if (\$http_authorization != \"Bearer $token\") { return 401; }"
  fi
  if [ -n "$up_token" ]; then
    echo "      proxy_set_header Authorization \"Bearer $up_token\";"
  elif [ -n "$token" ]; then
    echo "      proxy_set_header Authorization \"\";"
  fi
  cat <<EOF
      proxy_pass http://microspec_pairs;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      # The pairs answer only Host names they know (loopback, their address,
      # http.allowed_hosts): the front is their client, under a loopback name.
      proxy_set_header Host localhost;
      proxy_buffering off;
      proxy_request_buffering on;
      proxy_next_upstream error timeout non_idempotent;
      proxy_next_upstream_tries ${#servers[@]};
      proxy_connect_timeout 5s;
      proxy_read_timeout 600s;
      proxy_send_timeout 60s;
      add_header X-MicroSpec-Pair \$upstream_addr always;
    }
    location / { return 404; }
  }
}
EOF
} >"$out/nginx.conf.new"
"$nginx" -t -q -p "$out" -c "$out/nginx.conf.new" -e "$out/error.log" ||
  { echo "$me: nginx refuses the generated configuration ($out/nginx.conf.new)" >&2; exit 1; }
mv -f "$out/nginx.conf.new" "$out/nginx.conf"
echo "$me: $out/nginx.conf: ${#servers[@]} pairs behind http://$listen:$port/v1/" >&2
case "$action" in
  start) exec "$nginx" -p "$out" -c "$out/nginx.conf" -e "$out/error.log" ;;
  foreground) exec "$nginx" -p "$out" -c "$out/nginx.conf" -e "$out/error.log" -g 'daemon off;' ;;
esac
