"""Sets up an S3-compatible server that checks signatures (moto started with
INITIAL_NO_AUTH_ACTION_COUNT): an IAM user allowed to put and get objects of one
bucket (no listing, no delete), its access key, and the bucket. These four requests
are the unauthenticated ones moto allows; every later request must be signed by a key
it knows.

Usage: s3_iam.py ENDPOINT BUCKET   Prints {"access_key_id": …, "secret_access_key": …}.
"""

import json
import sys

import boto3

endpoint, bucket = sys.argv[1], sys.argv[2]
anyone = {
    "endpoint_url": endpoint,
    "region_name": "us-east-1",
    "aws_access_key_id": "setup",
    "aws_secret_access_key": "setup",
}
iam = boto3.client("iam", **anyone)
iam.create_user(UserName="airlock")
iam.put_user_policy(
    UserName="airlock",
    PolicyName="results",
    PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Action": ["s3:PutObject", "s3:GetObject"],
            "Resource": [f"arn:aws:s3:::{bucket}/*"],
        }],
    }),
)
key = iam.create_access_key(UserName="airlock")["AccessKey"]
boto3.client("s3", **anyone).create_bucket(Bucket=bucket)
print(json.dumps({
    "access_key_id": key["AccessKeyId"],
    "secret_access_key": key["SecretAccessKey"],
}))
