/* lib/s3: the XML answers as AWS and others write them (entities, self-closing
 * elements, the token after or before the Contents), the refusals of bad ones,
 * the canonical encoding of keys and query values, the settings check. The
 * requests themselves are tested against real HTTP servers in
 * tests/integration/snapshots/s3.test.mjs. */
#include <stdlib.h>
#include <string.h>

#include "lib/s3.h"
#include "tk_test.h"

#define S(x) x, strlen(x)

TEST(error_answer)
{
    char code[64], msg[256];
    CHECK(tk_s3_parse_error(S("<?xml version=\"1.0\"?>\n<Error><Code>NoSuchKey</Code><Message>"
                              "a &amp; b &lt;c&gt; &#65;&#x42; &quot;q&apos;</Message>"
                              "<RequestId>1</RequestId></Error>"),
                            code, sizeof code, msg, sizeof msg) == TK_OK);
    CHECK_STR(code, "NoSuchKey");
    CHECK_STR(msg, "a & b <c> AB \"q'");
    CHECK(tk_s3_parse_error(S("<html>gateway</html>"), code, sizeof code, msg, sizeof msg) ==
          TK_ENOENT);
    /* an entity that is not one, a NUL character, a raw '<' in text */
    CHECK(tk_s3_parse_error(S("<Error><Code>a&bogus;</Code></Error>"), code, sizeof code, msg,
                            sizeof msg) == TK_EINVAL);
    CHECK(tk_s3_parse_error(S("<Error><Code>&#0;</Code></Error>"), code, sizeof code, msg,
                            sizeof msg) == TK_EINVAL);
    CHECK(tk_s3_parse_error(S("<Error><Code>x</Code"), code, sizeof code, msg, sizeof msg) ==
          TK_EINVAL);
    char small[4];
    CHECK(tk_s3_xml_text(S("<Code>toolong</Code>"), "Code", small, sizeof small) == TK_ETOOBIG);
    CHECK(tk_s3_xml_text(S("<Codex>1</Codex><Code>2</Code>"), "Code", small, sizeof small) ==
          TK_OK);
    CHECK_STR(small, "2");
    CHECK(tk_s3_xml_text(S("<Code/>"), "Code", small, sizeof small) == TK_OK);
    CHECK_STR(small, "");
    CHECK(tk_s3_xml_text(S("<Code>&#x110000;</Code>"), "Code", small, sizeof small) == TK_EINVAL);
}

TEST(list_page)
{
    tk_s3_list l;
    const char *x =
        "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name>"
        "<Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
        "<IsTruncated>true</IsTruncated><Contents><Key>p/a&amp;b c.tar.gz</Key>"
        "<LastModified>2026-12-02T10:00:00.000Z</LastModified><ETag>&quot;e&quot;</ETag>"
        "<Size>123</Size><StorageClass>STANDARD</StorageClass></Contents>"
        "<Contents><Key>p/\xc3\xa9</Key><Size>0</Size></Contents>"
        "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</"
        "NextContinuationToken>"
        "</ListBucketResult>";
    CHECK(tk_s3_parse_list(S(x), &l) == TK_OK);
    CHECK_INT(l.n, ==, 2);
    CHECK_STR(l.items[0].key, "p/a&b c.tar.gz");
    CHECK_INT(l.items[0].size, ==, 123);
    CHECK_STR(l.items[0].last_modified, "2026-12-02T10:00:00.000Z");
    CHECK_STR(l.items[1].key, "p/\xc3\xa9");
    CHECK(l.truncated);
    CHECK_STR(l.next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
    tk_s3_list_free(&l);
    /* empty, and refusals: a negative size, no key, truncated without a token */
    CHECK(
        tk_s3_parse_list(S("<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>"),
                         &l) == TK_OK);
    CHECK_INT(l.n, ==, 0);
    tk_s3_list_free(&l);
    CHECK(tk_s3_parse_list(S("<ListBucketResult><Contents><Key>a</Key><Size>-1</Size></Contents>"
                             "</ListBucketResult>"),
                           &l) == TK_EINVAL);
    CHECK(tk_s3_parse_list(S("<ListBucketResult><Contents><Size>1</Size></Contents>"
                             "</ListBucketResult>"),
                           &l) == TK_EINVAL);
    CHECK(tk_s3_parse_list(S("<ListBucketResult><IsTruncated>true</IsTruncated>"
                             "</ListBucketResult>"),
                           &l) == TK_EINVAL);
    CHECK(tk_s3_parse_list(S("<Error><Code>x</Code></Error>"), &l) == TK_EINVAL);
}

TEST(uploads_page)
{
    tk_s3_uploads u;
    CHECK(tk_s3_parse_uploads(
              S("<ListMultipartUploadsResult><Bucket>b</Bucket><KeyMarker/><IsTruncated>false"
                "</IsTruncated><Upload><Key>p/x</Key><UploadId>abc</UploadId><Initiator><ID>i"
                "</ID></Initiator><Initiated>2026-11-30T00:00:00.000Z</Initiated></Upload>"
                "<Upload><Key>p/y</Key><UploadId>def</UploadId></Upload>"
                "</ListMultipartUploadsResult>"),
              &u) == TK_OK);
    CHECK_INT(u.n, ==, 2);
    CHECK_STR(u.items[0].key, "p/x");
    CHECK_STR(u.items[0].upload_id, "abc");
    CHECK_STR(u.items[0].initiated, "2026-11-30T00:00:00.000Z");
    CHECK_STR(u.items[1].initiated, "");
    tk_s3_uploads_free(&u);
    CHECK(tk_s3_parse_uploads(S("<ListMultipartUploadsResult><Upload><Key>k</Key></Upload>"
                                "</ListMultipartUploadsResult>"),
                              &u) == TK_EINVAL);
}

TEST(encoding)
{
    char out[64];
    CHECK(tk_s3_encode("a/b c+d=é~_.-", 1, out, sizeof out) == TK_OK);
    CHECK_STR(out, "a/b%20c%2Bd%3D%C3%A9~_.-");
    CHECK(tk_s3_encode("a/b", 0, out, sizeof out) == TK_OK);
    CHECK_STR(out, "a%2Fb");
    char tiny[4];
    CHECK(tk_s3_encode("a b", 0, tiny, sizeof tiny) == TK_ETOOBIG);
    char h[65];
    tk_s3_sha256_hex("", 0, h);
    CHECK_STR(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(config_refusals)
{
    char err[256];
    tk_s3_config c = {.endpoint = "http://127.0.0.1:9",
                      .region = "us-east-1",
                      .bucket = "snaps",
                      .access_key = "AK",
                      .secret_key = "SK",
                      .part_size = 16 << 20};
    tk_s3 *s = tk_s3_new(&c, err, sizeof err);
    CHECK(s != NULL);
    tk_s3_free(s);
    c.part_size = 1 << 20;
    CHECK(tk_s3_new(&c, err, sizeof err) == NULL);
    CHECK(strstr(err, "part size"));
    c.part_size = 16 << 20;
    c.bucket = "Bad_Bucket";
    CHECK(tk_s3_new(&c, err, sizeof err) == NULL);
    c.bucket = "snaps";
    c.endpoint = "ftp://x";
    CHECK(tk_s3_new(&c, err, sizeof err) == NULL);
    c.endpoint = "http://user@host";
    CHECK(tk_s3_new(&c, err, sizeof err) == NULL);
    c.endpoint = "http://h";
    c.region = "us east";
    CHECK(tk_s3_new(&c, err, sizeof err) == NULL);
    /* the secret never appears in a message */
    c.region = "us-east-1";
    c.access_key = "A:K";
    c.secret_key = "TOPSECRET";
    CHECK(tk_s3_new(&c, err, sizeof err) == NULL);
    CHECK(!strstr(err, "TOPSECRET"));
}

TEST_MAIN()
