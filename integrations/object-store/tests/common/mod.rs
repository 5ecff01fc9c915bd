//! What the S3 tests share: moto's S3 server, started from the Python that
//! `BLOBCASK_TEST_PYTHON` names (scripts/test.sh sets it).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};

use blobcask_object_store::v013::object_store::aws::{AmazonS3, AmazonS3Builder};

/// moto's S3 server on a free loopback port, with the bucket made; stops
/// when dropped (its stdin closes).
pub struct Moto(Child, u16);

impl Moto {
    pub fn start() -> Moto {
        let python = std::env::var("BLOBCASK_TEST_PYTHON").expect(
            "BLOBCASK_TEST_PYTHON must name a Python with moto[server] and boto3 \
             (scripts/test.sh sets it)",
        );
        let script = r#"
import sys, boto3
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
server.start()
port = server._server.server_port
boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
             aws_access_key_id="test", aws_secret_access_key="test").create_bucket(Bucket="bucket")
print("PORT", port, flush=True)
sys.stdin.read()
server.stop()
"#;
        let mut child = Command::new(python)
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start moto");
        // moto prints its own banner first; our line starts with PORT.
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let port = loop {
            let mut line = String::new();
            if out.read_line(&mut line).expect("moto's output") == 0 {
                panic!("moto exited before it served");
            }
            if let Some(port) = line.strip_prefix("PORT ") {
                break port.trim().parse().expect("a port number");
            }
        };
        Moto(child, port)
    }

    /// object_store's S3 client for the bucket.
    pub fn client(&self) -> AmazonS3 {
        AmazonS3Builder::new()
            .with_endpoint(format!("http://127.0.0.1:{}", self.1))
            .with_allow_http(true)
            .with_bucket_name("bucket")
            .with_region("us-east-1")
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .build()
            .unwrap()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        drop(self.0.stdin.take().map(|mut i| i.write_all(b"")));
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
