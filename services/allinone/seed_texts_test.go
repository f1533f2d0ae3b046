package allinone_test

// The seeds' request bodies, verbatim (seeds_test.go replays them).

// seed000Line106 is seed 000 lines 106-132.
const seed000Line106 = `{
"metadata" : {
"name": "lc-1", //unique name for the record
"description": "logical cloud for walmart finance department", //description for the logical cloud
"userData1":"<user data>",
"userData2":"<user data>"
},
"spec" : {
"namespace" : "ns-1", // one namespace per logical cloud
"user" : {
"user-name" : "user-1", //name of user for this cloud (username and logical cloud name would be used as subject for the user key)
"type" : "certificate", //type of authentication credentials used by user (certificate, Token, UNPW)
"user-permissions" : [
{ "permission-name" : "permission-1",
"apiGroups" : ["stable.example.com"],
"resources" : ["secrets", "pods"],
"verbs" : ["get", "watch", "list", "create"]
},
{ "permission-name" : "permission-2",
"apiGroups" : [""],
"resources" : ["configmaps"],
"verbs" : ["*"]
}
]
}
}
}`

// seed001Line47 is seed 001 lines 47-49.
const seed001Line47 = `{
 "loadbalancer-ip" : "0.0.0.0"  //IP address of the istio loadbalancer for the logical cloud control plane in the cluster
}`

// seed002Line37 is seed 002 line 37, from "POST BODY: " to " curl".
const seed002Line37 = `{ "name": "logical-cloud-1", //unique name for the new logical cloud "description": "logical cloud for walmart finance department", //description for the logical cloud "cluster-labels": "abc,xyz", "resources": { "cpu": "400", "memory": "1000Gi", "pods": "500", "dummy/dummyResource": 100, }, "user" : [{ "name" : "user-1", //name of user for this cloud "type" : "certificate", //type of authentication credentials used by user (certificate, APIKey, UNPW) "certificate" : "/path/to/user1/logical cloud-1-user1.csr" , //Path to user certificate "permissions" : { "apiGroups" : ["stable.example.com"] "resources" : ["secrets", "pods"] "verbs" : ["get", "watch", "list", "create"] }, "quota" : { "cpu": "100", "memory": "500Gi", "pods": "100", "dummy/dummyResource": 20 }] } }`

// seed002Line67 is seed 002 line 67, from "POST BODY: " to " curl".
const seed002Line67 = `{ "name": "logical-cloud-1", //unique name for the new logical cloud "namespace": "Logical-cloud-1-istio-system", "ca-cert": "", "ca-key": "", "root-cert": "", "cert-chain" "" "user" : { "name" : "user-2", //name of user for this cloud "type" : "certificate", //type of authentication credentials used by user (certificate, APIKey, UNPW) "certificate" : "/path/to/user2/logical cloud-1-user2.csr" , //Path to user certificate "permissions" : { "apiGroups" : ["stable.example.com"] "resources" : ["secrets", "pods"] "verbs" : ["get", "watch", "list", "create"] }, "quota" : { "cpu": "200", "memory": "300Gi", "pods": "200", "dummy/dummyResource": 30, } } }`

// seed002Line70 is seed 002 line 70, from "POST BODY: " to " curl".
const seed002Line70 = `{ "name": "logical-cloud-1", //unique name for the new logical cloud "user" : { "name" : "user-2", //name of user for this cloud "type" : "certificate", //type of authentication credentials used by user (certificate, APIKey, UNPW) "certificate" : "/path/to/user2/logical cloud-1-user2.csr" , //Path to user certificate "permissions" : { "apiGroups" : ["stable.example.com"] "resources" : ["secrets", "pods"] "verbs" : ["get", "watch", "list", "create"] }, "quota" : { "cpu": "200", "memory": "300Gi", "pods": "200", "dummy/dummyResource": 30, } } }`

// seed004Line82 is seed 004 lines 82-85.
const seed004Line82 = `{
	"name": "john",
	"description": "Traffic intent groups"
}`

// seed004Line95 is seed 004 lines 95-117.
const seed004Line95 = `{
	"name": "johndoe" //unique name for each intent
    "description": "connectivity intent for microservice replication across multiple locations and clusters" 
	  		"inboundservicename": "sleep01" //actual name of the client service
			"description": "bookinfo app", 
			"protocol": "HTTP",
			"externalPrefix": "httpservice01", // Optional, default = "", This is the prefix used to expose this service outside the cluster, not mandatory for "intercluster" API
			"headless": "false",
			"mutualTLS": "true", // Setting this to true will create a dedicated egrees gateway for the service "httpbin01" on whichever cluster it is running on
			"port" : "80", // port on which service in exposed as.
			"serviceMesh": "istio", // get it from cluster record
		  	"loadbalancing": "true", // optional
			"serviceaccounts": [] 
			"clientServices": [{
		  		"clientServiceName": "httpbin02", // if any then allow all the external applications to connect, check for serviceaccount level access
		  		"headless": "false",
				"egressgateway": "true" ,  // Optional, default = false, All the outbound traffic from this service will flow through a dedicated egress gateway
	        },{
		  	"clientServiceName": "httpbin03", // Note that this is a replication of the "httpbin" serivce which may be running is another cluster. The details of this service will be known only after scheduling.
		  		"headless": "false",
				"egressgateway": "true",  // Optional, default = false, All the outbound traffic from this service will flow through a dedicated egress gateway
	        }]
}`

// seed004Line146 is seed 004 lines 146-187.
const seed004Line146 = `{
    "description": "connectivity intent for microservice replication across multiple locations and clusters"
	"connectivityResource": [
	  { "microservice01": // unique name of the microservice.not the actual name of the microservice
			"name": "httpbin01", //actual name of the service
			"application": "bookinfo", // name of the application to which this microservice belongs
			"egressgateway": "true", // All the outbound traffic from this service will flow through a dedicated egress gateway
			"externalPrefix": "", // This is the prefix used to expose this service outside the cluster, not required for externaloutbound API
			"mutualTLS": "true",
			"port" : "80", // port on which service in exposed as.
			"serviceMesh": "istio", // type of service mesh used
		  	//"loadbalancing": "true" // optional.
			"clientServices": [{
		  		"clientServiceName": "mongo.k8s.com", // FQDN of the external Webservice
		  		"protocol": "HTTP",
		  		"type": "external"
	      },{
		  		"clientServiceName": "newsfeed.news.com", // FQDN of the external Webservice
		  		"protocol": "HTTP",
		  		"type": "external"
	      }]
		}, { 
		"microservice02":
			"name": "httpbin01", //actual name of the service
			"application": "bookinfo", // name of the application to which this microservice belongs
			"egressgateway": "true", // All the outbound traffic from this service will flow through a dedicated egress gateway
			"externalPrefix": "", // This is the prefix used to expose this service outside the cluster, not required for externaloutbound API
			"mutualTLS": "true",
			"port" : "80", // port on which service in exposed as.
			"serviceMesh": "istio", // type of service mesh used
			"clientServices": [{
		  		"clientServiceName": "google.com", // FQDN of the external Webservice
		  		"protocol": "HTTP", // if TCP, the port number of the external service should be known
		  		"type": "external"
		    },{
		  		"clientServiceName": "review.gerrit.com" // FQDN of the external Webservice
		  		"protocol": "HTTP",
		  		"type": "external"
		  	}]
	  }
	]
}`

// seed004Line202 is seed 004 lines 202-227.
const seed004Line202 = `{
    "description": "connectivity intent for microservice replication across multiple locations and clusters"
	"connectivityResource": [
	  { "microservice01": // unique name of the microservice. not the actual name of the microservice as seen by kubernetes
			"name": "httpbin01", // actual name of the service
			"application": "bookinfo", // name of the application to which this microservice belongs
			"egressgateway": "true", // All the outbound traffic from this service will flow through a dedicated egress gateway
			"externalPrefix": "httpservice01", // This is the prefix used to expose this service outside the cluster, not required for "intracluster" API
			"mutualTLS": "true",
			"port" : "80", // port on which service in exposed as.
			"serviceMesh": "istio", // type of service mesh used
		  	//"loadbalancing": "true" // optional.
			"clientServices": [{
		  		"clientServiceName": "httpbin02",
		  		"protocol": "HTTP",
		  		"headless": "false",
				"type": "intracluster"
	      },{
		  		"clientServiceName": "httpbin03",
		  		"protocol": "HTTP",
		  		"type": "kubernetes",
		  		"headless": "false",
				"type:": "intracluster"
	      }]
		}
}`

// seed004Line361 is seed 004 lines 361-384.
const seed004Line361 = `{
  "description": "dns provider intent for updating user facing microservice FQDNs to external DNS providers",
  "dnsProvider": [
    {
      "id": "microservice01", // unique name of the microservice - provides association to other connectivity intents
      "externalName": "service1.example.com",  // redundant ? - this name should be deployed to istio gateway on microservice deployment (this may not be the right spot)
      "cluster-selector": "label1, label2, ...",  // labels to select which clusters this dns provider is to be used
      "externalDnsParameters": {   // list will be supplied to external-dns as parameters.
                                   // for example ...
        "aws-zone-type": "",          When using the AWS provider, filter for zones of this type (optional, options: public, private)
        "aws-zone-tags": "",          When using the AWS provider, filter for zones with these tags
        "aws-assume-role":"",         When using the AWS provider, assume this IAM role. Useful for hosted zones in another AWS account. Specify the full ARN, e.g. ` + "`" + `arn:aws:iam::123455567:role/external-dns` + "`" + ` (optional)
        "aws-batch-change-size":"1000",  When using the AWS provider, set the maximum number of changes that will be applied in each batch.
        "aws-batch-change-interval":"1s", When using the AWS provider, set the interval between batch changes.
        "aws-evaluate-target-health":"enabled", When using the AWS provider, set whether to evaluate the health of a DNS target (default: enabled, disable with --no-aws-evaluate-target-health)
        "aws-api-retries":"3",           When using the AWS provider, set the maximum number of retries for API calls before giving up.
        "aws-prefer-cname":"disabled"           When using the AWS provider, prefer using CNAME instead of ALIAS (default: disabled)
      }
      providerCredentials: {
        ...
      }
    }
  ]
}`
